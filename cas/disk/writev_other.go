//go:build !linux

package disk

import "os"

// writeBuffers writes bufs to f in order, one write each where there is no
// writev, and returns how many bytes it wrote.
func writeBuffers(f *os.File, bufs [][]byte) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.Write(b)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
