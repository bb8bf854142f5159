package azure

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// accessToken is a bearer token for the storage service and when it
// stops working.
type accessToken struct {
	token   string
	expires time.Time
}

// tokenFunc fetches a token; it is called again before the token
// expires.
type tokenFunc func(ctx context.Context) (accessToken, error)

// tokenError is a failure to get a token: the credential is refused or
// cannot be reached, not the storage service.
type tokenError struct {
	source string
	err    error
}

func (e *tokenError) Error() string {
	return fmt.Sprintf("azure: no token from %s: %v", e.source, e.err)
}

func (e *tokenError) Unwrap() error { return e.err }

// tokenSource hands out a token, fetched once and again shortly before it
// expires. It is safe for concurrent use.
type tokenSource struct {
	// name says where the tokens come from, for the log.
	name  string
	fetch tokenFunc
	// now is the clock (time.Now but in tests).
	now func() time.Time

	mu     sync.Mutex
	cached accessToken
	// failed is the last fetch's error until retryFetch after it, so
	// that requests waiting on a source that does not answer fail
	// together, not each after its own timeout.
	failed     error
	failedTime time.Time
}

// retryFetch is how long a failed fetch's error stands.
const retryFetch = 5 * time.Second

// refreshBefore is how long before its expiry a token is fetched again:
// a request that carries it must reach the service in time.
const refreshBefore = 5 * time.Minute

func newTokenSource(name string, fetch tokenFunc) *tokenSource {
	return &tokenSource{name: name, fetch: fetch, now: time.Now}
}

// get returns the token, fetching it if there is none yet or it expires
// soon.
func (s *tokenSource) get(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.cached.token != "" && s.cached.expires.Sub(now) > refreshBefore {
		return s.cached.token, nil
	}
	if s.failed != nil && now.Sub(s.failedTime) < retryFetch {
		return "", s.failed
	}
	t, err := s.fetch(ctx)
	if err == nil && t.token == "" {
		err = fmt.Errorf("the answer has no access token")
	}
	if err != nil {
		err = &tokenError{source: s.name, err: err}
		if ctx.Err() == nil {
			s.failed, s.failedTime = err, now
		}
		return "", err
	}
	s.failed = nil
	s.cached = t
	return t.token, nil
}
