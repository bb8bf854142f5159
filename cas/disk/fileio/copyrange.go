package fileio

import (
	"fmt"
	"io"
	"os"
)

// CopyRange writes n bytes of f from off to w and returns how many it
// wrote. It moves f's offset (it reads f from off with read, not pread),
// so nothing else may use that offset meanwhile; the store reads its files
// only with pread. The bytes go to w's ReadFrom, if it has one, as an
// *io.LimitedReader of f: to a TCP connection, package net sends them with
// sendfile, from the page cache to the socket without a copy in the
// process. f ending before off+n is io.ErrUnexpectedEOF.
func CopyRange(w io.Writer, f *os.File, off, n int64) (int64, error) {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("disk: seeking %s: %w", f.Name(), err)
	}
	written, err := io.Copy(w, &io.LimitedReader{R: f, N: n})
	if err == nil && written < n {
		err = io.ErrUnexpectedEOF
	}
	return written, err
}
