package httpcache

import (
	"strconv"
	"strings"
)

// byteRange is [off, end) of a blob.
type byteRange struct{ off, end int64 }

// parseRange reads a Range header for a blob of size bytes (RFC 9110,
// 14.1.2): one range, "bytes=first-last", "bytes=first-" or
// "bytes=-suffix". ok is false when the header is to be ignored and the
// whole blob served, as the RFC lets a server do: no header, another unit,
// several ranges (no cache client asks for those), a malformed one, or an
// empty blob. satisfiable is false for a range that starts past the end
// (416).
func parseRange(h string, size int64) (r byteRange, ok, satisfiable bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || size == 0 || strings.Contains(spec, ",") {
		return byteRange{}, false, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false, false
	}
	if first == "" { // the last n bytes
		n, err := parseOffset(last)
		if err != nil {
			return byteRange{}, false, false
		}
		if n == 0 {
			return byteRange{}, true, false
		}
		return byteRange{max(size-n, 0), size}, true, true
	}
	off, err := parseOffset(first)
	if err != nil {
		return byteRange{}, false, false
	}
	end := size
	if last != "" {
		l, err := parseOffset(last)
		if err != nil || l < off {
			return byteRange{}, false, false
		}
		end = min(l+1, size)
	}
	if off >= size {
		return byteRange{}, true, false
	}
	return byteRange{off, end}, true, true
}

// parseOffset reads a non-negative decimal offset; only digits, as the RFC
// has it (strconv alone would take a sign).
func parseOffset(s string) (int64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseInt(s, 10, 64)
}
