//go:build unix

package gocacheprog

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// createTemp creates a new file under dir to write, as os.CreateTemp does,
// without what os.OpenFile adds for a file it might poll: on a regular
// file, three more fcntl and an epoll_ctl that fails, each a syscall, on
// every file a get or put writes.
func createTemp(dir string) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, "put-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		fd, err := syscall.Open(name, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if err == syscall.EEXIST || err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
	return nil, &os.PathError{Op: "createtemp", Path: filepath.Join(dir, "put-*"), Err: errors.New("no free name")}
}

// rename is os.Rename without its lookup of whether to is a directory
// (one syscall): to is always a file's name here, and rename(2) fails on
// a directory anyway.
func rename(from, to string) error {
	if err := syscall.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
