package main

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1234": 1234, "10GiB": 10 << 30, "500M": 500 << 20, "2KiB": 2048, "1T": 1 << 40} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "ten", "1.5G", "99999999999T"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// A variable that does not parse is an error naming it, never ignored.
func TestBadEnvironmentVariable(t *testing.T) {
	t.Setenv("MEMBUF_GOCACHE_GET_TIMEOUT", "soon")
	if err := run(nil); err == nil || !strings.Contains(err.Error(), "MEMBUF_GOCACHE_GET_TIMEOUT") {
		t.Fatalf("run with a bad variable: %v", err)
	}
}

// A password from the environment needs a user in the URL.
func TestPasswordNeedsUser(t *testing.T) {
	t.Setenv("MEMBUF_GOCACHE_PASSWORD", "secret")
	err := run([]string{"-dir", t.TempDir(), "-remote", "https://cache.example"})
	if err == nil || !strings.Contains(err.Error(), "names no user") {
		t.Fatalf("run: %v", err)
	}
	if u, err := withPassword("https://ci@cache.example", "secret"); err != nil || u != "https://ci:secret@cache.example" {
		t.Fatalf("withPassword: %q, %v", u, err)
	}
}
