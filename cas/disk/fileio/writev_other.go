//go:build !linux

package fileio

import "os"

// WriteBuffers writes bufs to f in order, one write each where there is no
// writev, and returns how many bytes it wrote.
func WriteBuffers(f *os.File, bufs [][]byte) (int, error) {
	return WriteBuffersAt(f, bufs, -1)
}

// WriteBuffersAt is WriteBuffers at offset off of f, or at f's offset if
// off < 0.
func WriteBuffersAt(f *os.File, bufs [][]byte, off int64) (int, error) {
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
