package vfs

import (
	"fmt"
	"io"
)

// CopyRange writes n bytes of f from off to w and returns how many it
// wrote. A file of Default is read from off with read, not pread, so it
// moves the file's offset, and nothing else may use that offset
// meanwhile (the store reads its files only with ReadAt). Its bytes go to
// w's ReadFrom, if it has one, as an *io.LimitedReader of the *os.File: to
// a TCP connection, package net sends them with sendfile, from the page
// cache to the socket without a copy in the process. Any other File is
// read with ReadAt. f ending before off+n is io.ErrUnexpectedEOF.
func CopyRange(w io.Writer, f File, off, n int64) (int64, error) {
	var src io.Reader
	if of, ok := f.(*osFile); ok {
		if _, err := of.osf().Seek(off, io.SeekStart); err != nil {
			return 0, fmt.Errorf("disk: seeking %s: %w", f.Name(), err)
		}
		src = &io.LimitedReader{R: of.osf(), N: n}
	} else {
		src = io.NewSectionReader(f, off, n)
	}
	written, err := io.Copy(w, src)
	if err == nil && written < n {
		err = io.ErrUnexpectedEOF
	}
	return written, err
}
