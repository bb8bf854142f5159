// Package accesstest helps tests of servers that take access.Control: the
// htpasswd file of a set of users.
package accesstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// WriteHtpasswd writes an htpasswd file with users and their passwords into
// t's temporary directory and returns its path. The hashes are bcrypt at
// its lowest cost: tests check logic, not strength.
func WriteHtpasswd(t testing.TB, users map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# users for a test\n\n")
	for u, p := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s\n", u, h)
	}
	path := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
