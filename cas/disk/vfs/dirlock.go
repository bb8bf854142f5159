package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrLocked: another process holds the directory's lock.
var ErrLocked = errors.New("store directory is in use by another process")

// lockFileName is the file in the directory that one process at a time
// holds an exclusive lock on, for as long as it uses the directory. It
// holds a line naming that process, for the error the next one gets.
const lockFileName = "LOCK"

// osDirLock is Default's lock on a directory: an exclusive flock on its
// LOCK file, held by one process (a Store on its directory) until Unlock
// or its exit.
type osDirLock struct {
	f *os.File // nil where the platform has no flock: nothing is held
}

// lockDir takes the exclusive lock on dir, creating the lock file LOCK in
// it; an error wrapping ErrLocked names the process that holds it. A store
// takes it before anything in dir is touched: two processes on one
// directory would each empty the other's tmp/ at start and evict the
// other's files. The kernel drops the lock when the process
// dies however it dies, so a crash never leaves the directory locked.
func lockDir(dir string) (*osDirLock, error) {
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
		return &osDirLock{}, nil
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("pid %d (%s) on %s since %s\n", os.Getpid(), filepath.Base(os.Args[0]), host, time.Now().UTC().Format(time.RFC3339))
	// Best effort: the lock, not this line, is what excludes the others.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(who), 0)
	}
	return &osDirLock{f: f}, nil
}

// Unlock releases the lock (closing the file releases it).
func (l *osDirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
