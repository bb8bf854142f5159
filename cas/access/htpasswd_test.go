package access

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/access/accesstest"
	"golang.org/x/crypto/bcrypt"
)

func TestParseHtpasswd(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	good := "# team\n\nalice:" + string(hash) + "\n  bob:" + string(hash) + "  \n"
	users, err := parseHtpasswd([]byte(good))
	if err != nil || len(users) != 2 || users["alice"] == nil || users["bob"] == nil {
		t.Fatalf("parseHtpasswd(good) = %v, %v; want alice and bob", users, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"alice", "line 1: want user:bcrypt-hash"},
		{":" + string(hash), "line 1: want user:bcrypt-hash"},
		{"alice:" + string(hash) + "\nalice:" + string(hash), `line 2: user "alice" appears twice`},
		{"# md5\ncarol:$apr1$abcdefgh$abcdefghijklmnopqrstuv", `line 2: user "carol": not a bcrypt hash`},
		{"dave:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", `user "dave": not a bcrypt hash`},
		{"erin:plaintext", `user "erin": not a bcrypt hash`},
	} {
		if _, err := parseHtpasswd([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseHtpasswd(%q) = %v; want an error saying %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseHtpasswd: the parser never panics, and every user it accepts
// has a hash bcrypt can check against.
func FuzzParseHtpasswd(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzParseHtpasswd.
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := parseHtpasswd(data)
		if err != nil {
			return
		}
		for u, h := range users {
			if u == "" || strings.ContainsAny(u, ":\n") {
				t.Fatalf("accepted user name %q", u)
			}
			if _, err := bcrypt.Cost(h); err != nil {
				t.Fatalf("accepted user %q with a hash bcrypt cannot use: %v", u, err)
			}
		}
	})
}

func TestHtpasswdCheckAndReload(t *testing.T) {
	path := accesstest.WriteHtpasswd(t, map[string]string{"alice": "old"})
	h, err := LoadHtpasswd(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Users() != 1 {
		t.Fatalf("Users() = %d; want 1", h.Users())
	}
	check := func(user, pw string) error {
		t.Helper()
		got, err := h.Check(user, pw, nil)
		if err == nil && got != user {
			t.Fatalf("Check(%q) returned user %q", user, got)
		}
		return err
	}
	for range 2 { // the second time from the cache
		if err := check("alice", "old"); err != nil {
			t.Fatalf("right password: %v", err)
		}
		if err := check("alice", "wrong"); !errors.Is(err, errBadCredentials) {
			t.Fatalf("wrong password: %v", err)
		}
		if err := check("mallory", "old"); !errors.Is(err, errBadCredentials) {
			t.Fatalf("unknown user: %v", err)
		}
	}
	// A new file: the old password no longer works (the cache is gone), the
	// new one does.
	fresh := accesstest.WriteHtpasswd(t, map[string]string{"alice": "new", "bob": "b"})
	data, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := check("alice", "old"); !errors.Is(err, errBadCredentials) {
		t.Errorf("old password after the reload: %v; want refused", err)
	}
	if err := check("alice", "new"); err != nil {
		t.Errorf("new password after the reload: %v", err)
	}
	// A broken file keeps the users in force.
	if err := os.WriteFile(path, []byte("alice:plaintext\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(); err == nil {
		t.Fatal("Reload of a broken file succeeded")
	}
	if err := check("bob", "b"); err != nil || h.Users() != 2 {
		t.Errorf("after a failed reload: bob %v, %d users; want the previous file in force", err, h.Users())
	}
	if _, err := LoadHtpasswd(path + ".missing"); err == nil {
		t.Error("LoadHtpasswd of a missing file succeeded")
	}
}

// An unknown user must cost what a known user's wrong password costs: the
// hash checked for unknown users is a valid bcrypt hash at the cost
// htpasswd -B and LoadHtpasswd's users have by default.
func TestTheUnknownUsersHashCostsWhatAUsersDoes(t *testing.T) {
	cost, err := bcrypt.Cost(dummyHash)
	if err != nil || cost != bcrypt.DefaultCost {
		t.Fatalf("dummyHash: cost %d, %v; want %d", cost, err, bcrypt.DefaultCost)
	}
	if err := bcrypt.CompareHashAndPassword(dummyHash, []byte("guess")); err != bcrypt.ErrMismatchedHashAndPassword {
		t.Fatalf("comparing a guess with dummyHash: %v, want a mismatch", err)
	}
}
