//go:build !linux

package disk

import "os"

// writeBuffers writes bufs to f in order, one write each where there is no
// writev, and returns how many bytes it wrote.
func writeBuffers(f *os.File, bufs [][]byte) (int, error) {
	return writeBuffersAt(f, bufs, -1)
}

// writeBuffersAt is writeBuffers at offset off of f, or at f's offset if
// off < 0.
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
