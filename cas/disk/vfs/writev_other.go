//go:build !linux

package vfs

import "os"

// writeBuffersAt writes bufs to f in order, one write each where there is
// no writev, at offset off of f or, if off < 0, at f's offset, and returns
// how many bytes it wrote.
func writeBuffersAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		var n int
		var err error
		if off < 0 {
			n, err = f.Write(b)
		} else {
			n, err = f.WriteAt(b, off+int64(total))
		}
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
