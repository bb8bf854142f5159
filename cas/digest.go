package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

// hashLen is the length of a SHA-256 hash in lowercase hex, the only digest
// function this server supports.
const hashLen = 2 * sha256.Size

// emptyHash is the SHA-256 of no bytes. The empty blob is always present
// (remote_execution.proto: "Servers MUST behave as though empty blobs are
// always available"), so it is never stored.
const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Digest identifies a blob: the lowercase hex SHA-256 of its content and its
// size in bytes. A Digest made by ParseDigest or parseResourceName is valid.
type Digest struct {
	Hash string
	Size int64
}

// String formats d as hash/size, the form used in resource names.
func (d Digest) String() string { return fmt.Sprintf("%s/%d", d.Hash, d.Size) }

// Proto returns d as a REAPI Digest message.
func (d Digest) Proto() *repb.Digest { return &repb.Digest{Hash: d.Hash, SizeBytes: d.Size} }

// isEmpty reports whether d names the empty blob.
func (d Digest) isEmpty() bool { return d.Size == 0 && d.Hash == emptyHash }

// DigestOf returns the digest of data.
func DigestOf(data []byte) Digest {
	sum := sha256.Sum256(data)
	return Digest{Hash: hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// ParseDigest checks a REAPI Digest message: a hash of exactly 64 lowercase
// hex characters and a non-negative size. The error names what is wrong.
func ParseDigest(p *repb.Digest) (Digest, error) {
	if p == nil {
		return Digest{}, fmt.Errorf("digest is missing")
	}
	if err := checkHash(p.Hash); err != nil {
		return Digest{}, err
	}
	if p.SizeBytes < 0 {
		return Digest{}, fmt.Errorf("digest %s has negative size %d", p.Hash, p.SizeBytes)
	}
	return Digest{Hash: p.Hash, Size: p.SizeBytes}, nil
}

// checkHash accepts exactly 64 lowercase hex characters.
func checkHash(h string) error {
	if len(h) != hashLen {
		return fmt.Errorf("hash %q is %d characters; a SHA-256 hash is %d lowercase hex characters (the only digest function this server supports)", clip(h), len(h), hashLen)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("hash %q has %q at position %d; a hash is lowercase hex", clip(h), c, i)
		}
	}
	return nil
}

// clip shortens s for an error message so a huge bad input does not make a
// huge error.
func clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// checkDigestFunction accepts the digest_function field of a request: unset
// (the server infers SHA-256 from the hash length) or SHA256.
func checkDigestFunction(f repb.DigestFunction_Value) error {
	if f == repb.DigestFunction_UNKNOWN || f == repb.DigestFunction_SHA256 {
		return nil
	}
	return fmt.Errorf("digest function %s is not supported; this server supports only SHA256", f)
}
