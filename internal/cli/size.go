package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps a size suffix, lower-cased, to its multiplier. The bare
// letters are binary, as bazel-remote's and dd's are: people who write 10G for
// a cache mean 10 GiB. The two-letter SI forms are there for those who mean
// powers of 1000.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"k":   1 << 10,
	"kib": 1 << 10,
	"kb":  1e3,
	"m":   1 << 20,
	"mib": 1 << 20,
	"mb":  1e6,
	"g":   1 << 30,
	"gib": 1 << 30,
	"gb":  1e9,
	"t":   1 << 40,
	"tib": 1 << 40,
	"tb":  1e12,
}

const sizeSyntax = "a whole number of bytes, optionally followed by K, M, G or T (powers of 1024, also written KiB, MiB, GiB, TiB) or KB, MB, GB, TB (powers of 1000)"

// ParseSize parses a byte count such as 4096, 64KiB, 10G or 500MB. Its errors
// do not repeat s: the flag package already quotes the value it was given.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("not a size: want %s", sizeSyntax)
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q: want %s", strings.TrimSpace(t[i:]), sizeSyntax)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("too large: at most %d bytes", int64(math.MaxInt64))
	}
	return n * unit, nil
}

// FormatSize writes n with the largest binary unit that divides it, so that
// defaults print the way a user would type them.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Size is a flag.Value holding a byte count written with ParseSize's
// syntax.
type Size struct {
	P *int64
}

func (f Size) String() string {
	if f.P == nil {
		return ""
	}
	return FormatSize(*f.P)
}

func (f Size) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*f.P = n
	return nil
}
