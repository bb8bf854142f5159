package gcs_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/membuf/membuf/internal/fakegcstest"
)

// startFakeGCS starts the shared fake-gcs-server harness (a real
// fake-gcs-server on loopback, its data in a directory of the test's, so
// that Stop and Restart are an outage over the same data) with the
// buckets named, and stops it when the test ends.
func startFakeGCS(t *testing.T, buckets ...string) *fakegcstest.Server {
	t.Helper()
	f := fakegcstest.Start(t)
	for _, name := range buckets {
		res, err := http.Post(f.Endpoint+"/storage/v1/b?project=membuf", "application/json", bytes.NewReader(fmt.Appendf(nil, `{"name":%q}`, name)))
		if err != nil {
			t.Fatalf("creating bucket %s: %v", name, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("creating bucket %s: %s", name, res.Status)
		}
	}
	return f
}
