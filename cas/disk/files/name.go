package files

import (
	"strings"

	"github.com/membuf/membuf/cas"
)

// ParseName parses the name of a blob's file named by a hash of function
// fn (the store's cas/ or ac/ for SHA-256, {kind}-{function}/ for the
// others): a hash of fn's length, or such a hash and a size followed by
// .zst for a blob kept compressed; ok is false for any other name.
func ParseName(fn cas.Function, name string) (hash string, size int64, zstd, ok bool) {
	n := fn.HashLen()
	if len(name) == n && fn.CheckHash(name) == nil {
		return name, 0, false, true
	}
	rest, found := strings.CutSuffix(name, ".zst")
	if !found || len(rest) < n+2 || rest[n] != '-' || fn.CheckHash(rest[:n]) != nil {
		return "", 0, false, false
	}
	size, err := cas.ParseSize(rest[n+1:])
	// Only the name ZstdPath makes: a size with a leading zero would name
	// a file the entry's path is not.
	if err != nil || size == 0 || rest[n+1] < '1' || rest[n+1] > '9' {
		return "", 0, false, false
	}
	return rest[:n], size, true, true
}
