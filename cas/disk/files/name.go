package files

import (
	"strings"

	"github.com/membuf/membuf/cas"
)

// ParseName parses the name of a blob's file (the store's cas/ or ac/): a
// hash, or a hash and a size followed by .zst for a blob kept compressed;
// ok is false for any other name.
func ParseName(name string) (hash string, size int64, zstd, ok bool) {
	if cas.CheckHash(name) == nil {
		return name, 0, false, true
	}
	rest, found := strings.CutSuffix(name, ".zst")
	if !found || len(rest) < cas.HashLen+2 || rest[cas.HashLen] != '-' || cas.CheckHash(rest[:cas.HashLen]) != nil {
		return "", 0, false, false
	}
	size, err := cas.ParseSize(rest[cas.HashLen+1:])
	if err != nil || size == 0 {
		return "", 0, false, false
	}
	return rest[:cas.HashLen], size, true, true
}
