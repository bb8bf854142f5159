package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrLocked: another process has the store's directory open.
var ErrLocked = errors.New("store directory is in use by another process")

// lockFileName is the file in the store's directory that one process at a
// time holds an exclusive lock on, for as long as its Store is open. It
// holds a line naming that process, for the error the next one gets.
const lockFileName = "LOCK"

// dirLock is the lock a Store holds on its directory.
type dirLock struct {
	f *os.File // nil where the platform has no flock: nothing is held
}

// lockDir takes the exclusive lock on dir before anything in it is touched:
// two processes on one directory would each empty the other's tmp/ at start
// and evict the other's files. The kernel drops the lock when the process
// dies however it dies, so a crash never leaves the directory locked.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	held, err := flockExclusive(f)
	if err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			holder, _ := os.ReadFile(path)
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "a process that has not written its name yet"
			}
			return nil, fmt.Errorf("%w: %s is held by %s; stop it or choose another directory", ErrLocked, dir, who)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if !held {
		f.Close()
		return &dirLock{}, nil
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("pid %d (%s) on %s since %s\n", os.Getpid(), filepath.Base(os.Args[0]), host, time.Now().UTC().Format(time.RFC3339))
	// Best effort: the lock, not this line, is what excludes the others.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(who), 0)
	}
	return &dirLock{f: f}, nil
}

// unlock releases the lock (closing the file releases it).
func (l *dirLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
