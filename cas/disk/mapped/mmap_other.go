//go:build !unix

package mapped

import "os"

func mmap(*os.File, int64, int) ([]byte, error) { return nil, ErrUnsupported }

func munmap([]byte) error { return nil }
