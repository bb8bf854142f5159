package tracing_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cmd/membuf/internal/tracing"
)

// No endpoint builds nothing: the server then installs no handler and
// wraps nothing.
func TestNoEndpointNoTracing(t *testing.T) {
	tr, err := tracing.New(tracing.Config{Sampling: 0.5})
	if tr != nil || err != nil {
		t.Fatalf("New without an endpoint = %v, %v; want nil, nil", tr, err)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown of no tracing: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  tracing.Config
		want string
	}{
		{tracing.Config{Endpoint: "collector:4318", Sampling: 0.1}, "want http://HOST:PORT"},
		{tracing.Config{Endpoint: "ftp://collector:4318", Sampling: 0.1}, "want http://HOST:PORT"},
		{tracing.Config{Endpoint: "http://collector:4318", Sampling: 1.5}, "want 0 to 1"},
		{tracing.Config{Endpoint: "http://collector:4318", Sampling: -0.1}, "want 0 to 1"},
	} {
		if _, err := tracing.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v; want an error saying %q", c.cfg, err, c.want)
		}
	}
	tr, err := tracing.New(tracing.Config{Endpoint: "http://127.0.0.1:1", Sampling: 0.01})
	if err != nil || tr == nil {
		t.Fatalf("New with an endpoint: %v, %v", tr, err)
	}
	tr.Shutdown(t.Context()) // nothing to export: no request to the endpoint
}
