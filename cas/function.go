package cas

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/zeebo/blake3"
)

// Function is a digest function: how a blob's name is made from its bytes.
// The zero value is SHA-256, REAPI's default, so a Digest that names no
// function is a SHA-256 digest.
type Function uint8

const (
	SHA256 Function = iota
	SHA1
	SHA384
	SHA512
	BLAKE3
	numFunctions
)

// Functions lists every digest function the cache speaks, SHA-256 first:
// the order Capabilities announces them in.
var Functions = []Function{SHA256, SHA1, SHA384, SHA512, BLAKE3}

type functionSpec struct {
	name  string // lowercase, as REAPI's resource names spell it
	size  int    // bytes of a hash
	proto repb.DigestFunction_Value
	new   func() hash.Hash
	empty string // the hash of no bytes, in hex
}

var functionSpecs = [numFunctions]functionSpec{
	SHA256: {name: "sha256", size: sha256.Size, proto: repb.DigestFunction_SHA256, new: sha256.New},
	SHA1:   {name: "sha1", size: sha1.Size, proto: repb.DigestFunction_SHA1, new: sha1.New},
	SHA384: {name: "sha384", size: sha512.Size384, proto: repb.DigestFunction_SHA384, new: sha512.New384},
	SHA512: {name: "sha512", size: sha512.Size, proto: repb.DigestFunction_SHA512, new: sha512.New},
	BLAKE3: {name: "blake3", size: 32, proto: repb.DigestFunction_BLAKE3, new: func() hash.Hash { return blake3.New() }},
}

func init() {
	for i := range functionSpecs {
		h := functionSpecs[i].new()
		functionSpecs[i].empty = hex.EncodeToString(h.Sum(nil))
	}
}

// Valid reports whether f is one of Functions.
func (f Function) Valid() bool { return f < numFunctions }

// String is f's name as REAPI's resource names spell it: "sha256",
// "blake3".
func (f Function) String() string {
	if !f.Valid() {
		return fmt.Sprintf("Function(%d)", uint8(f))
	}
	return functionSpecs[f].name
}

// Size is the length of f's hash in bytes.
func (f Function) Size() int { return functionSpecs[f].size }

// HashLen is the length of f's hash in lowercase hex.
func (f Function) HashLen() int { return 2 * functionSpecs[f].size }

// New returns a hash.Hash computing f.
func (f Function) New() hash.Hash { return functionSpecs[f].new() }

// Proto is f as REAPI's DigestFunction enum names it.
func (f Function) Proto() repb.DigestFunction_Value { return functionSpecs[f].proto }

// EmptyHash is f's hash of no bytes: the name of the empty blob, which is
// always present and never stored.
func (f Function) EmptyHash() string { return functionSpecs[f].empty }

// Digest returns the digest of data under f.
func (f Function) Digest(data []byte) Digest {
	if f == SHA256 {
		sum := sha256.Sum256(data) // on the stack: no hasher to allocate
		return Digest{Hash: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	}
	h := f.New()
	h.Write(data)
	var sum [64]byte
	return Digest{Hash: hex.EncodeToString(h.Sum(sum[:0])), Size: int64(len(data)), Function: f}
}

// CheckHash accepts exactly f's HashLen lowercase hex characters. The error
// names the function and the length it wants.
func (f Function) CheckHash(h string) error {
	if len(h) != f.HashLen() {
		return fmt.Errorf("hash %q is %d characters; a %s hash is %d lowercase hex characters", Clip(h), len(h), f.Title(), f.HashLen())
	}
	for i := 0; i < len(h); i++ {
		if hexValue[h[i]] > 0xf {
			return fmt.Errorf("hash %q has %q at position %d; a hash is lowercase hex", Clip(h), h[i], i)
		}
	}
	return nil
}

// Title is f's name as people write it in prose: "SHA-256", "BLAKE3".
func (f Function) Title() string {
	switch f {
	case SHA1:
		return "SHA-1"
	case SHA256:
		return "SHA-256"
	case SHA384:
		return "SHA-384"
	case SHA512:
		return "SHA-512"
	case BLAKE3:
		return "BLAKE3"
	}
	return f.String()
}

// FunctionOf maps REAPI's DigestFunction enum to a Function, as a request's
// digest_function field names it. UNKNOWN, which a request that names no
// function carries, is not a function: InferFunction decides those.
func FunctionOf(v repb.DigestFunction_Value) (Function, error) {
	for f := range numFunctions {
		if functionSpecs[f].proto == v {
			return f, nil
		}
	}
	return 0, fmt.Errorf("digest function %s is not served here; this server speaks %s", v, FunctionTitles())
}

// FunctionNamed maps a function's name in a resource name ("sha256",
// "blake3") to the Function.
func FunctionNamed(name string) (Function, bool) {
	for f := range numFunctions {
		if functionSpecs[f].name == name {
			return f, true
		}
	}
	return 0, false
}

// InferFunction decides the function of a request: the one its
// digest_function field names, or, for a request that names none (v is
// UNKNOWN: an old client), the one whose hash length hash has (SHA-1's 40
// hex digits, SHA-384's 96, SHA-512's 128); any other hash, 64 digits
// among them, is SHA-256's, as REAPI says.
func InferFunction(v repb.DigestFunction_Value, hash string) (Function, error) {
	if v != repb.DigestFunction_UNKNOWN {
		return FunctionOf(v)
	}
	return FunctionOfLength(len(hash)), nil
}

// FunctionOfLength is the function an old client means by a hash of n hex
// digits, which names no function: SHA-1, SHA-384 or SHA-512 by their
// lengths, and SHA-256 otherwise (BLAKE3 is always named).
func FunctionOfLength(n int) Function {
	switch n {
	case SHA1.HashLen():
		return SHA1
	case SHA384.HashLen():
		return SHA384
	case SHA512.HashLen():
		return SHA512
	}
	return SHA256
}

// ParseDigestFor checks a REAPI Digest message under function f: a hash of
// exactly f's length in lowercase hex and a non-negative size. The error
// names what is wrong.
func ParseDigestFor(f Function, p *repb.Digest) (Digest, error) {
	if p == nil {
		return Digest{}, fmt.Errorf("digest is missing")
	}
	if err := f.CheckHash(p.Hash); err != nil {
		return Digest{}, err
	}
	if p.SizeBytes < 0 {
		return Digest{}, fmt.Errorf("digest %s has negative size %d", p.Hash, p.SizeBytes)
	}
	return Digest{Hash: p.Hash, Size: p.SizeBytes, Function: f}, nil
}

// FunctionTitles lists Functions by their Titles, for an error that says
// which functions are served: "SHA-256, SHA-1, ...".
func FunctionTitles() string {
	s := ""
	for i, f := range Functions {
		if i > 0 {
			s += ", "
		}
		s += f.Title()
	}
	return s
}
