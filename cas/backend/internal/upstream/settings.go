package upstream

import (
	"fmt"
	"log/slog"
	"time"
)

// Settings are the fields every upstream backend's Config has beside its
// Location.
type Settings struct {
	RequestTimeout time.Duration
	Concurrency    int
	Logger         *slog.Logger
}

// WithDefaults returns s with its zero fields set to the defaults, or an
// error naming a negative one (pkg prefixes it).
func (s Settings) WithDefaults(pkg string) (Settings, error) {
	if s.RequestTimeout < 0 || s.Concurrency < 0 {
		return Settings{}, fmt.Errorf("%s: negative RequestTimeout %v or Concurrency %d", pkg, s.RequestTimeout, s.Concurrency)
	}
	if s.RequestTimeout == 0 {
		s.RequestTimeout = DefaultRequestTimeout
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}
