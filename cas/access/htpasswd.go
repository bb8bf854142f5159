package access

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
	"golang.org/x/crypto/bcrypt"
)

// Htpasswd is a set of users and bcrypt password hashes, in the format of
// Apache's htpasswd file written with `htpasswd -B` (bcrypt; the only
// hash this accepts, the others being fast to brute-force):
//
//	# comment
//	alice:$2y$10$...
//
// It checks the credentials clients send with HTTP basic authentication
// (the gRPC metadata "authorization: Basic base64(user:password)", which
// Bazel sends for --remote_header=Authorization=... or a credential
// helper). Checking a bcrypt hash costs tens of milliseconds of CPU by
// design, so Check remembers credentials it accepted (by their SHA-256,
// never in clear, for credentialTTL) and those it refused, and runs at most
// maxBcrypt checks at once: a client with the right password pays once,
// and one guessing passwords cannot take every core.
//
// An Htpasswd is safe for concurrent use; Reload replaces its users.
type Htpasswd struct {
	path string

	mu     sync.Mutex
	users  map[string][]byte // name -> bcrypt hash
	good   map[[32]byte]cachedCredential
	bad    map[[32]byte]time.Time
	checks chan struct{} // a token per bcrypt check running
	gen    int           // counts Reloads: a check of an older file caches nothing
}

type cachedCredential struct {
	user string
	at   time.Time
}

const (
	// credentialTTL is how long accepted or refused credentials are
	// remembered: a password changed in the file is in force after a
	// Reload at once, or after this without one.
	credentialTTL = 5 * time.Minute
	// maxCachedCredentials bounds each of the two caches; past it the cache
	// is emptied (cheap, and a flood of distinct guesses gains nothing).
	maxCachedCredentials = 4096
)

// maxBcrypt is how many bcrypt checks run at once: half the machine's
// cores, at least one.
var maxBcrypt = max(1, runtime.GOMAXPROCS(0)/2)

// dummyHash is checked for unknown users, so that an unknown name costs as
// long as a wrong password and the time does not tell which names exist. It
// is a constant, a bcrypt hash at bcrypt.DefaultCost of a password no user
// has, not one made at start: making it cost every start of the program,
// even one that reads no htpasswd file, about a tenth of a second of CPU.
var dummyHash = []byte("$2a$10$GctXEie5VOLpzxUSWw1PA.bsi8or/HGsxFHZklOLxEoRlAze9Jh.a")

// LoadHtpasswd reads an htpasswd file. Every line must be a user and a
// bcrypt hash; the error names the first line that is not.
func LoadHtpasswd(path string) (*Htpasswd, error) {
	h := &Htpasswd{path: path, checks: make(chan struct{}, maxBcrypt)}
	if err := h.Reload(); err != nil {
		return nil, err
	}
	return h, nil
}

// Reload reads the file again. On an error the users in force stay.
func (h *Htpasswd) Reload() error {
	data, err := os.ReadFile(h.path)
	if err != nil {
		return fmt.Errorf("htpasswd: %w", err)
	}
	users, err := parseHtpasswd(data)
	if err != nil {
		return fmt.Errorf("htpasswd %s: %w", h.path, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users = users
	h.good = make(map[[32]byte]cachedCredential)
	h.bad = make(map[[32]byte]time.Time)
	h.gen++
	return nil
}

// Users returns how many users the file in force names.
func (h *Htpasswd) Users() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.users)
}

// parseHtpasswd parses the content of an htpasswd file.
func parseHtpasswd(data []byte) (map[string][]byte, error) {
	users := make(map[string][]byte)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		switch {
		case !ok || user == "":
			return nil, fmt.Errorf("line %d: want user:bcrypt-hash", n)
		case users[user] != nil:
			return nil, fmt.Errorf("line %d: user %q appears twice", n, cas.Clip(user))
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil || !isBcrypt(hash) {
			return nil, fmt.Errorf("line %d: user %q: not a bcrypt hash (only bcrypt is accepted: write the file with htpasswd -B)", n, cas.Clip(user))
		}
		users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return users, nil
}

func isBcrypt(hash string) bool {
	for _, p := range []string{"$2a$", "$2b$", "$2y$"} {
		if strings.HasPrefix(hash, p) {
			return true
		}
	}
	return false
}

// errBadCredentials is what every failed check says: not whether the user
// exists.
var errBadCredentials = errors.New("invalid user name or password")

// Check returns the user whose name and password these are, or
// errBadCredentials. It may wait for a bcrypt slot; done stops the wait.
func (h *Htpasswd) Check(user, password string, done <-chan struct{}) (string, error) {
	key := sha256.Sum256([]byte(user + "\x00" + password))
	now := time.Now()
	h.mu.Lock()
	if c, ok := h.good[key]; ok && now.Sub(c.at) < credentialTTL {
		h.mu.Unlock()
		return c.user, nil
	}
	if at, ok := h.bad[key]; ok && now.Sub(at) < credentialTTL {
		h.mu.Unlock()
		return "", errBadCredentials
	}
	hash := h.users[user]
	gen := h.gen
	h.mu.Unlock()

	select {
	case h.checks <- struct{}{}:
	case <-done:
		return "", errors.New("gave up waiting to check credentials")
	}
	var err error
	if hash == nil {
		bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		err = errBadCredentials
	} else if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		err = errBadCredentials
	}
	<-h.checks

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		if err != nil {
			return "", err
		}
		return user, nil // checked against a file since replaced: answer, remember nothing
	}
	if err != nil {
		if len(h.bad) >= maxCachedCredentials {
			clear(h.bad)
		}
		h.bad[key] = now
		return "", err
	}
	if len(h.good) >= maxCachedCredentials {
		clear(h.good)
	}
	h.good[key] = cachedCredential{user, now}
	return user, nil
}
