package cas

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

// HashLen is the length of a SHA-256 hash in lowercase hex, the default
// digest function (Function.HashLen gives any function's).
const HashLen = 2 * sha256.Size

// EmptyHash is the SHA-256 of no bytes. The empty blob is always present
// (remote_execution.proto: "Servers MUST behave as though empty blobs are
// always available"), so it is never stored.
const EmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Digest identifies a blob: the lowercase hex hash of its content under
// Function, and its size in bytes. The zero Function is SHA-256, so a
// Digest that names none is a SHA-256 digest. A Digest made by ParseDigest,
// ParseDigestFor or ParseDigestString is valid. Two digests of different
// functions name different blobs, even with the same hash.
type Digest struct {
	Hash     string
	Size     int64
	Function Function
}

// String formats d as hash/size, the form used in resource names (which
// name a function other than SHA-256 in a segment of their own before it).
func (d Digest) String() string {
	var b [HashLen + 1 + 20]byte // a valid digest's text fits: one allocation, the string
	return string(d.AppendText(b[:0]))
}

// AppendText appends d as String formats it to b, for a caller that builds
// a longer string around it with one allocation.
func (d Digest) AppendText(b []byte) []byte {
	b = append(append(b, d.Hash...), '/')
	return strconv.AppendInt(b, d.Size, 10)
}

// ParseDigestString reads a digest as String writes it, hash/size, and
// checks it as ParseDigest does.
func ParseDigestString(s string) (Digest, error) { return ParseDigestStringFor(SHA256, s) }

// ParseDigestStringFor reads a digest of function f as String writes it,
// hash/size, and checks it as ParseDigestFor does.
func ParseDigestStringFor(f Function, s string) (Digest, error) {
	hash, size, ok := strings.Cut(s, "/")
	if !ok {
		return Digest{}, fmt.Errorf("digest %q: want hash/size", Clip(s))
	}
	if err := f.CheckHash(hash); err != nil {
		return Digest{}, err
	}
	n, err := ParseSize(size)
	if err != nil {
		return Digest{}, err
	}
	return Digest{Hash: hash, Size: n, Function: f}, nil
}

// Proto returns d as a REAPI Digest message, which does not carry the
// function: the request around it does.
func (d Digest) Proto() *repb.Digest { return &repb.Digest{Hash: d.Hash, SizeBytes: d.Size} }

// IsEmpty reports whether d names the empty blob.
func (d Digest) IsEmpty() bool {
	return d.Size == 0 && d.Function.Valid() && d.Hash == d.Function.EmptyHash()
}

// DigestOf returns the SHA-256 digest of data (Function.Digest: any
// function's).
func DigestOf(data []byte) Digest { return SHA256.Digest(data) }

// ParseDigest checks a REAPI Digest message as a SHA-256 digest: a hash of
// exactly 64 lowercase hex characters and a non-negative size. The error
// names what is wrong. ParseDigestFor checks one of any function.
func ParseDigest(p *repb.Digest) (Digest, error) {
	if p == nil {
		return Digest{}, fmt.Errorf("digest is missing")
	}
	if err := CheckHash(p.Hash); err != nil {
		return Digest{}, err
	}
	if p.SizeBytes < 0 {
		return Digest{}, fmt.Errorf("digest %s has negative size %d", p.Hash, p.SizeBytes)
	}
	return Digest{Hash: p.Hash, Size: p.SizeBytes}, nil
}

// ParseHash decodes a hash of 64 lowercase hex digits into its 32 bytes
// (without the allocation a []byte conversion would make, as tables of
// records key them); false if h is not one.
func ParseHash(h string) ([32]byte, bool) {
	var sum [32]byte
	if len(h) != HashLen {
		return sum, false
	}
	// A table lookup, not a comparison per digit: with random digits
	// those branches mispredict, and FindMissing, Open and commit each
	// parse a hash (BenchmarkParseHash: 97-155 ns to 22 ns).
	var bad byte
	for i := range sum {
		hi, lo := hexValue[h[2*i]], hexValue[h[2*i+1]]
		bad |= hi | lo
		sum[i] = hi<<4 | lo
	}
	return sum, bad&0xf0 == 0
}

// DecodeHash decodes h, lowercase hex of 2*len(dst) digits, into dst (a
// table of records keyed by hashes of any function's length); false if h
// is not that.
func DecodeHash(dst []byte, h string) bool {
	if len(h) != 2*len(dst) {
		return false
	}
	var bad byte
	for i := range dst {
		hi, lo := hexValue[h[2*i]], hexValue[h[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo
	}
	return bad&0xf0 == 0
}

// hexValue maps a lowercase hex digit to its value and any other byte to
// 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// CheckHash accepts exactly 64 lowercase hex characters: a SHA-256 hash
// (Function.CheckHash: any function's).
func CheckHash(h string) error {
	if _, ok := ParseHash(h); ok {
		return nil
	}
	if len(h) != HashLen {
		return fmt.Errorf("hash %q is %d characters; a SHA-256 hash is %d lowercase hex characters", Clip(h), len(h), HashLen)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("hash %q has %q at position %d; a hash is lowercase hex", Clip(h), c, i)
		}
	}
	return nil
}

// Clip shortens s for an error message so a huge bad input does not make a
// huge error.
func Clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// ParseSize accepts a non-negative decimal that fits an int64: digits only,
// no sign.
func ParseSize(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("size is empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("size %q is not a non-negative decimal number", Clip(s))
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q does not fit in 64 bits", Clip(s))
	}
	return n, nil
}
