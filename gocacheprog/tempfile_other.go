//go:build !unix

package gocacheprog

import "os"

func createTemp(dir string) (*os.File, error) { return os.CreateTemp(dir, "put-") }

func rename(from, to string) error { return os.Rename(from, to) }
