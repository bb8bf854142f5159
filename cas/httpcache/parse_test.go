package httpcache

import (
	"fmt"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
)

// FuzzParsePath: a path is accepted only if it ends in ac/ or cas/ and a
// valid hash, and then the hash returned is that ending.
func FuzzParsePath(f *testing.F) {
	f.Add("/cas/" + cas.EmptyHash)
	f.Add("/instance/ac/" + cas.EmptyHash)
	f.Add("cas/" + cas.EmptyHash)
	f.Add("/a/b/xcas/" + cas.EmptyHash)
	f.Add("/cas/" + strings.ToUpper(cas.EmptyHash))
	f.Add("/ac//" + cas.EmptyHash)
	f.Add("/cas/blake3/" + cas.BLAKE3.EmptyHash())
	f.Add("/i/ac/sha1/" + cas.SHA1.EmptyHash())
	f.Add("/cas/" + cas.SHA512.EmptyHash())
	f.Fuzz(func(t *testing.T, p string) {
		k, fn, hash, err := parsePath(p)
		if err != nil {
			return
		}
		if fn.CheckHash(hash) != nil {
			t.Fatalf("parsePath(%q) accepted hash %q as %s's", p, hash, fn.Title())
		}
		dir := "/cas/"
		if k == kindAC {
			dir = "/ac/"
		}
		// The function's segment may be left out only for the function
		// the hash's length implies.
		path := "/" + strings.TrimPrefix(p, "/")
		named := strings.HasSuffix(path, dir+fn.String()+"/"+hash)
		if !named && (cas.FunctionOfLength(len(hash)) != fn || !strings.HasSuffix(path, dir+hash)) {
			t.Fatalf("parsePath(%q) = %v, %s, %q; the path does not end in %q naming it", p, k, fn, hash, dir+hash)
		}
	})
}

// FuzzParseRange: an accepted, satisfiable range lies within the blob and
// is not empty; a byte range written back as a header parses to itself.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=10-", "bytes=-5", "bytes=5-1", "bytes=0-1,3-4", "bytes=+1-2", "items=0-1", "bytes= 3-4", "bytes=99999999999999999999-"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			return
		}
		r, ok, satisfiable := parseRange(h, size)
		if !ok || !satisfiable {
			return
		}
		if r.off < 0 || r.off >= r.end || r.end > size {
			t.Fatalf("parseRange(%q, %d) = [%d, %d): outside the blob or empty", h, size, r.off, r.end)
		}
		again, ok, satisfiable := parseRange(fmt.Sprintf("bytes=%d-%d", r.off, r.end-1), size)
		if !ok || !satisfiable || again != r {
			t.Fatalf("[%d, %d) written back parsed to [%d, %d)", r.off, r.end, again.off, again.end)
		}
	})
}

// Asking whether a keyed path is gocached's, as every keyed request does
// first, allocates nothing.
func TestParseGoCachePathOfAKeyedPathAllocatesNothing(t *testing.T) {
	p := "/sccache/a/b/c/" + cas.EmptyHash
	if allocs := testing.AllocsPerRun(100, func() { parseGoCachePath(p) }); allocs != 0 {
		t.Fatalf("parseGoCachePath(%q): %v allocations; want none", p, allocs)
	}
	if _, ok := parseGoCachePath("/action/" + cas.EmptyHash); !ok {
		t.Fatal("/action/{hash} is not taken for gocached's")
	}
}
