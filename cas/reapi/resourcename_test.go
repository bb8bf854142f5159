package reapi

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/testenv"
)

const testHash = "a665a45920422f9d417e4867efdc4fb8a04a1f3fff1fa07e998e86f7f7a27ae3" // sha256("123")

func TestParseReadName(t *testing.T) {
	good := []struct {
		name     string
		instance string
		size     int64
	}{
		{"blobs/" + testHash + "/3", "", 3},
		{"main/blobs/" + testHash + "/3", "main", 3},
		{"a/b/c/blobs/" + testHash + "/0", "a/b/c", 0},
		{"blobs/" + testHash + "/9223372036854775807", "", 9223372036854775807},
	}
	for _, tc := range good {
		rn, err := parseReadName(tc.name)
		if err != nil {
			t.Errorf("parseReadName(%q): %v", tc.name, err)
			continue
		}
		if rn.Instance != tc.instance || rn.Digest.Hash != testHash || rn.Digest.Size != tc.size {
			t.Errorf("parseReadName(%q) = %+v", tc.name, rn)
		}
	}
	bad := []struct{ name, want string }{
		{"", "empty"},
		{"/blobs/" + testHash + "/3", "empty path segment"},
		{"a//b/blobs/" + testHash + "/3", "empty path segment"},
		{"main/" + testHash + "/3", "no blobs/"},
		{"blobs/" + strings.ToUpper(testHash) + "/3", "lowercase hex"},
		{"blobs/" + testHash[:63] + "/3", "63 characters"},
		{"blobs/" + testHash + "0/3", "65 characters"},
		{"blobs/" + testHash[:63] + "g/3", "lowercase hex"},
		{"blobs/" + testHash + "/-3", "non-negative"},
		{"blobs/" + testHash + "/+3", "non-negative"},
		{"blobs/" + testHash + "/3x", "non-negative"},
		{"blobs/" + testHash + "/", "size is empty"},
		{"blobs/" + testHash, "expected {hash}/{size}"},
		{"blobs/" + testHash + "/99999999999999999999", "64 bits"},
		{"blobs/" + testHash + "/3/extra", "after the size"},
		{"blobs/sha1/" + testHash + "/3", "a SHA-1 hash is 40"},
		{"blobs/blake3/" + testHash[:40] + "/3", "a BLAKE3 hash is 64"},
		{"blobs/" + testHash[:50] + "/3", "a SHA-256 hash is 64"},
		{"blobs/sha256tree/" + testHash + "/3", "SHA256TREE is not served"},
		{"blobs/blake3/" + testHash, "expected {hash}/{size}"},
		{"uploads/u/blobs/" + testHash + "/3", "where blobs was expected"},
		{"compressed-blobs/identity/" + testHash + "/3", "identity"},
		{"compressed-blobs/lz4/" + testHash + "/3", "unknown compressor"},
		{"compressed-blobs/zstd/" + strings.ToUpper(testHash) + "/3", "lowercase hex"},
	}
	for _, tc := range bad {
		_, err := parseReadName(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseReadName(%q) error %v, want one containing %q", tc.name, err, tc.want)
		}
		if errors.Is(err, errCompressorUnsupported) {
			t.Errorf("parseReadName(%q): malformed name reported as merely unsupported", tc.name)
		}
	}
	sha1Hash, sha384Hash := testHash[:40], testHash+testHash[:32]
	functions := []struct {
		name string
		want cas.Digest
	}{
		{"blobs/" + testHash + "/3", cas.Digest{Hash: testHash, Size: 3}},
		{"blobs/sha256/" + testHash + "/3", cas.Digest{Hash: testHash, Size: 3}},
		{"blobs/blake3/" + testHash + "/3", cas.Digest{Hash: testHash, Size: 3, Function: cas.BLAKE3}},
		{"compressed-blobs/zstd/blake3/" + testHash + "/3", cas.Digest{Hash: testHash, Size: 3, Function: cas.BLAKE3}},
		{"blobs/" + sha1Hash + "/3", cas.Digest{Hash: sha1Hash, Size: 3, Function: cas.SHA1}},
		{"blobs/sha1/" + sha1Hash + "/3", cas.Digest{Hash: sha1Hash, Size: 3, Function: cas.SHA1}},
		{"i/blobs/" + sha384Hash + "/3", cas.Digest{Hash: sha384Hash, Size: 3, Function: cas.SHA384}},
		{"blobs/" + testHash + testHash + "/3", cas.Digest{Hash: testHash + testHash, Size: 3, Function: cas.SHA512}},
	}
	for _, tc := range functions {
		if rn, err := parseReadName(tc.name); err != nil || rn.Digest != tc.want {
			t.Errorf("parseReadName(%q) = %+v, %v; want digest %+v", tc.name, rn.Digest, err, tc.want)
		}
	}
	rn, err := parseReadName("x/compressed-blobs/zstd/" + testHash + "/3")
	if err != nil || rn.Compressor != "zstd" || rn.Instance != "x" || rn.Digest != (cas.Digest{Hash: testHash, Size: 3}) {
		t.Errorf("a zstd name: %+v, %v", rn, err)
	}
	for _, c := range []string{"deflate", "brotli"} {
		if _, err := parseReadName("compressed-blobs/" + c + "/" + testHash + "/3"); !errors.Is(err, errCompressorUnsupported) {
			t.Errorf("compressor %s: error %v, want errCompressorUnsupported", c, err)
		}
	}
}

func TestParseWriteName(t *testing.T) {
	good := []struct {
		name, instance, uuid, meta string
	}{
		{"uploads/u1/blobs/" + testHash + "/3", "", "u1", ""},
		{"inst/uploads/4b2b0a4c-6f3a-4b0e-9d0c-1c2d3e4f5a6b/blobs/" + testHash + "/3", "inst", "4b2b0a4c-6f3a-4b0e-9d0c-1c2d3e4f5a6b", ""},
		{"a/b/uploads/u/blobs/" + testHash + "/3/some/meta/data", "a/b", "u", "some/meta/data"},
		{"uploads/u/blobs/" + testHash + "/3/", "", "u", ""},
	}
	for _, tc := range good {
		rn, err := parseWriteName(tc.name)
		if err != nil {
			t.Errorf("parseWriteName(%q): %v", tc.name, err)
			continue
		}
		if rn.Instance != tc.instance || rn.UUID != tc.uuid || rn.Metadata != tc.meta || rn.Digest != (cas.Digest{Hash: testHash, Size: 3}) {
			t.Errorf("parseWriteName(%q) = %+v", tc.name, rn)
		}
	}
	bad := []struct{ name, want string }{
		{"blobs/" + testHash + "/3", "where uploads was expected"},
		{"uploads", "missing the upload uuid"},
		{"uploads//blobs/" + testHash + "/3", "missing the upload uuid"},
		{"uploads/blobs/" + testHash + "/3", "missing the upload uuid"},
		{"uploads/u/" + testHash + "/3", "expected blobs/"},
		{"uploads/u/blobs/" + testHash[:10] + "/3", "10 characters"},
		{"uploads/u/blobs/" + testHash + "/-1", "non-negative"},
		{"uploads/u/blobs/sha512/" + testHash + "/3", "a SHA-512 hash is 128"},
		{"uploads/u/blobs/gitsha1/" + testHash + "/3", "not served"},
		{"uploads/u/compressed-blobs/" + testHash + "/3", "unknown compressor"},
	}
	for _, tc := range bad {
		_, err := parseWriteName(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseWriteName(%q) error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	rn, err := parseWriteName("i/uploads/u/compressed-blobs/zstd/" + testHash + "/3/meta")
	if err != nil || rn.Compressor != "zstd" || rn.Instance != "i" || rn.UUID != "u" || rn.Metadata != "meta" || rn.Digest != (cas.Digest{Hash: testHash, Size: 3}) {
		t.Errorf("a zstd upload: %+v, %v", rn, err)
	}
	if _, err := parseWriteName("uploads/u/compressed-blobs/brotli/" + testHash + "/3"); !errors.Is(err, errCompressorUnsupported) {
		t.Errorf("a brotli upload: error %v, want errCompressorUnsupported", err)
	}
	rn, err = parseWriteName("i/uploads/u/compressed-blobs/zstd/blake3/" + testHash + "/3/meta")
	if err != nil || rn.Metadata != "meta" || rn.Digest != (cas.Digest{Hash: testHash, Size: 3, Function: cas.BLAKE3}) {
		t.Errorf("a BLAKE3 zstd upload: %+v, %v", rn, err)
	}
	sha, _ := parseWriteName("i/uploads/u/blobs/" + testHash + "/3")
	blake, _ := parseWriteName("i/uploads/u/blobs/blake3/" + testHash + "/3")
	if sha.uploadKey() == blake.uploadKey() {
		t.Errorf("one upload key %q for the same hash under SHA-256 and BLAKE3", sha.uploadKey())
	}
	a, _ := parseWriteName("i/uploads/u/blobs/" + testHash + "/3/m1")
	b, _ := parseWriteName("i/uploads/u/blobs/" + testHash + "/3/m2")
	if a.uploadKey() != b.uploadKey() {
		t.Errorf("metadata changes the upload key: %q vs %q", a.uploadKey(), b.uploadKey())
	}
}

// checkRoundTrip asserts that a name that parsed describes itself: the
// digest is valid and formatting it back reproduces the parse.
func checkRoundTrip(t *testing.T, rn resourceName, reparse func(string) (resourceName, error), format func(resourceName) string) {
	t.Helper()
	if err := rn.Digest.Function.CheckHash(rn.Digest.Hash); err != nil || rn.Digest.Size < 0 {
		t.Fatalf("parsed an invalid digest %+v", rn.Digest)
	}
	again, err := reparse(format(rn))
	if err != nil || again != rn {
		t.Fatalf("round trip of %+v: %+v, %v", rn, again, err)
	}
}

// blobPart formats the part of a name from blobs/ or compressed-blobs/ on.
func blobPart(rn resourceName) string {
	if rn.Compressor != "" {
		return "compressed-blobs/" + rn.Compressor + "/" + functionPart(rn.Digest) + rn.Digest.String()
	}
	return "blobs/" + functionPart(rn.Digest) + rn.Digest.String()
}

// functionPart is the digest function's segment of a name, with its slash:
// none for a function the hash's length implies.
func functionPart(d cas.Digest) string {
	if cas.FunctionOfLength(len(d.Hash)) == d.Function {
		return ""
	}
	return d.Function.String() + "/"
}

func joinInstance(inst, rest string) string {
	if inst == "" {
		return rest
	}
	return inst + "/" + rest
}

func FuzzParseReadName(f *testing.F) {
	f.Add("blobs/" + testHash + "/3")
	f.Add("a/b/blobs/" + testHash + "/0")
	f.Add("compressed-blobs/zstd/" + testHash + "/3")
	f.Add("blobs/blake3/" + testHash + "/3")
	f.Add("blobs/sha1/" + testHash[:40] + "/3")
	f.Fuzz(func(t *testing.T, name string) {
		rn, err := parseReadName(name)
		if err != nil {
			return
		}
		if rn.Compressor != "" && rn.Compressor != supportedCompressor {
			t.Fatalf("accepted compressor %q", rn.Compressor)
		}
		if want, _ := splitByJoin(name, 0); rn.Instance != want {
			t.Fatalf("instance %q, want %q", rn.Instance, want)
		}
		checkRoundTrip(t, rn, parseReadName, func(rn resourceName) string {
			return joinInstance(rn.Instance, blobPart(rn))
		})
	})
}

// splitByJoin is what strings.Split and strings.Join make of a name the
// parser accepted: its instance, and the segments after the size (skip is
// how many segments stand between the keyword and blobs/: 2 for
// uploads/{uuid}/). The parser slices the name instead of joining.
func splitByJoin(name string, skip int) (instance, after string) {
	segs := strings.Split(name, "/")
	i := slices.IndexFunc(segs, func(s string) bool { return reservedSegments[s] })
	j := i + skip + 1 // past blobs/ or compressed-blobs/
	if segs[i+skip] == "compressed-blobs" {
		j++
	}
	if _, ok := cas.FunctionNamed(segs[j]); ok {
		j++
	}
	return strings.Join(segs[:i], "/"), strings.Join(segs[j+2:], "/")
}

func FuzzParseWriteName(f *testing.F) {
	f.Add("uploads/u/blobs/" + testHash + "/3")
	f.Add("x/uploads/u/blobs/" + testHash + "/3/meta/data")
	f.Add("uploads/u/compressed-blobs/zstd/" + testHash + "/3")
	f.Add("uploads/u/compressed-blobs/zstd/blake3/" + testHash + "/3/m")
	f.Fuzz(func(t *testing.T, name string) {
		rn, err := parseWriteName(name)
		if err != nil {
			return
		}
		if rn.Compressor != "" && rn.Compressor != supportedCompressor {
			t.Fatalf("accepted compressor %q", rn.Compressor)
		}
		if inst, meta := splitByJoin(name, 2); rn.Instance != inst || rn.Metadata != meta {
			t.Fatalf("instance %q and metadata %q, want %q and %q", rn.Instance, rn.Metadata, inst, meta)
		}
		if rn.UUID == "" || strings.Contains(rn.UUID, "/") {
			t.Fatalf("parsed uuid %q", rn.UUID)
		}
		checkRoundTrip(t, rn, parseWriteName, func(rn resourceName) string {
			s := joinInstance(rn.Instance, "uploads/"+rn.UUID+"/"+blobPart(rn))
			if rn.Metadata != "" {
				s += "/" + rn.Metadata
			}
			return s
		})
	})
}

// TestParseNamesAllocateNothing: a ByteStream upload's and read's resource
// names, with no instance (Bazel's default) and with one of a few
// segments, metadata included, parse with no allocation: every upload and
// read parses one (strings.Split and Join made 3 and 5 allocations here;
// one a name for Bazel's, which have neither instance nor metadata).
func TestParseNamesAllocateNothing(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	hash := strings.Repeat("ab", 32)
	for _, inst := range []string{"", "projects/p/instances/default/"} {
		write := inst + "uploads/3f2c1d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f/blobs/" + hash + "/4096/meta/data"
		read := inst + "compressed-blobs/zstd/" + hash + "/4096"
		blake3 := inst + "blobs/blake3/" + hash + "/4096"
		if n := testing.AllocsPerRun(100, func() {
			if _, err := parseWriteName(write); err != nil {
				t.Fatal(err)
			}
			if _, err := parseReadName(read); err != nil {
				t.Fatal(err)
			}
			if _, err := parseReadName(blake3); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("parsing %s and %s: %v allocations, want 0", write, read, n)
		}
	}
}
