package main

import (
	"strings"
	"testing"
)

// The --s3 names of the --upstream flags still work, and start-up warns
// once of each one set, naming the flag to use; the --upstream names
// bring no such warning.
func TestDeprecatedS3FlagsWarnOnce(t *testing.T) {
	s := startServe(t, "--s3-timeout", "5s", "--s3-missing-ttl", "3s")
	code, _, stderr := s.stop()
	if code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr)
	}
	for _, name := range []string{"s3-timeout", "s3-missing-ttl"} {
		want := "--" + name + " is deprecated: use --up"
		if n := strings.Count(stderr, want); n != 1 {
			t.Errorf("the log says %q %d times, want once:\n%s", want, n, stderr)
		}
	}

	s = startServe(t, "--upstream-timeout", "5s", "--upstream-missing-ttl", "3s")
	if _, _, stderr := s.stop(); strings.Contains(stderr, "deprecated") {
		t.Errorf("the --upstream names are warned about:\n%s", stderr)
	}
}
