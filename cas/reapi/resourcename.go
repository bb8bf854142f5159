package reapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
)

// Resource names, as remote_execution.proto defines them:
//
//	read:  {instance_name}/blobs/{digest_function/}{hash}/{size}
//	       {instance_name}/compressed-blobs/{compressor}/{digest_function/}{hash}/{size}
//	write: {instance_name}/uploads/{uuid}/blobs/{digest_function/}{hash}/{size}{/optional_metadata}
//	       {instance_name}/uploads/{uuid}/compressed-blobs/{compressor}/{digest_function/}{hash}/{size}{/optional_metadata}
//
// No segment of an instance name may be one of the keywords below, so the
// parser walks forward to the first keyword; everything before it is the
// instance name (possibly empty, possibly several segments).

// resourceName is a parsed ByteStream resource name.
type resourceName struct {
	Instance   string // "" when the name starts with a keyword
	UUID       string // write names only
	Compressor string // "" for blobs/, else the compressor of compressed-blobs/
	Digest     cas.Digest
	Metadata   string // write names only: whatever follows the size, without the slash
}

// errCompressorUnsupported is wrapped by the parse error of a well-formed
// compressed-blobs name whose compressor this server does not advertise
// (it supports zstd only).
var errCompressorUnsupported = errors.New("this server supports only the zstd compressor (the one it advertises in its capabilities); use compressed-blobs/zstd/ or blobs/")

// supportedCompressor is the one compressor compressed-blobs names may use.
const supportedCompressor = "zstd"

var reservedSegments = map[string]bool{
	"blobs": true, "uploads": true, "actions": true, "actionResults": true,
	"operations": true, "capabilities": true, "compressed-blobs": true,
}

// digestFunctionsUnserved are digest functions REAPI names that this
// server does not speak: a resource name that names one is refused as
// such, not as a malformed hash.
var digestFunctionsUnserved = map[string]bool{
	"md5": true, "murmur3": true, "vso": true, "sha256tree": true, "gitsha1": true,
}

var compressors = map[string]bool{"zstd": true, "deflate": true, "brotli": true}

// parseReadName parses a ByteStream Read resource name.
func parseReadName(name string) (resourceName, error) {
	var buf [nameSegments]string
	segs, i, err := splitAtKeyword(name, buf[:0])
	if err != nil {
		return resourceName{}, err
	}
	rn := resourceName{Instance: name[:joinedLen(segs[:i])]}
	if segs[i] != "blobs" && segs[i] != "compressed-blobs" {
		return resourceName{}, fmt.Errorf("resource name %q: a read name is {instance}/blobs/{hash}/{size}, found %q where blobs was expected", cas.Clip(name), segs[i])
	}
	rest, err := rn.parseBlob(name, segs[i:])
	if err != nil {
		return resourceName{}, err
	}
	if len(rest) > 0 {
		return resourceName{}, fmt.Errorf("resource name %q: unexpected %q after the size; a read name ends with the size", cas.Clip(name), cas.Clip(strings.Join(rest, "/")))
	}
	return rn.checkCompressor(name)
}

// parseWriteName parses a ByteStream Write (or QueryWriteStatus) resource
// name.
func parseWriteName(name string) (resourceName, error) {
	var buf [nameSegments]string
	segs, i, err := splitAtKeyword(name, buf[:0])
	if err != nil {
		return resourceName{}, err
	}
	rn := resourceName{Instance: name[:joinedLen(segs[:i])]}
	if segs[i] != "uploads" {
		return resourceName{}, fmt.Errorf("resource name %q: a write name is {instance}/uploads/{uuid}/blobs/{hash}/{size}, found %q where uploads was expected", cas.Clip(name), segs[i])
	}
	if len(segs) < i+2 || segs[i+1] == "" {
		return resourceName{}, fmt.Errorf("resource name %q: missing the upload uuid after uploads/", cas.Clip(name))
	}
	rn.UUID = segs[i+1]
	if reservedSegments[rn.UUID] {
		return resourceName{}, fmt.Errorf("resource name %q: missing the upload uuid after uploads/ (found the keyword %q)", cas.Clip(name), rn.UUID)
	}
	if len(segs) < i+3 || (segs[i+2] != "blobs" && segs[i+2] != "compressed-blobs") {
		return resourceName{}, fmt.Errorf("resource name %q: expected blobs/ after the upload uuid", cas.Clip(name))
	}
	rest, err := rn.parseBlob(name, segs[i+2:])
	if err != nil {
		return resourceName{}, err
	}
	// Optional metadata: servers may ignore it, and this one does.
	rn.Metadata = name[len(name)-joinedLen(rest):]
	return rn.checkCompressor(name)
}

// checkCompressor refuses a compressor other than the one supported.
func (rn resourceName) checkCompressor(name string) (resourceName, error) {
	if rn.Compressor != "" && rn.Compressor != supportedCompressor {
		return rn, fmt.Errorf("resource name %q: compressor %s: %w", cas.Clip(name), rn.Compressor, errCompressorUnsupported)
	}
	return rn, nil
}

// nameSegments is space for the segments of a resource name with an
// instance of a few segments, on the parser's stack: strings.Split made a
// slice on the heap for every upload and read. A longer name grows it
// there.
const nameSegments = 16

// splitAtKeyword appends the segments of name to segs and returns them,
// with the index of the first keyword segment. Instance segments must be
// non-empty.
func splitAtKeyword(name string, segs []string) ([]string, int, error) {
	if name == "" {
		return nil, 0, fmt.Errorf("resource name is empty")
	}
	for rest, more := name, true; more; {
		var seg string
		seg, rest, more = strings.Cut(rest, "/")
		segs = append(segs, seg)
	}
	for i, s := range segs {
		if reservedSegments[s] {
			return segs, i, nil
		}
		if s == "" {
			return nil, 0, fmt.Errorf("resource name %q has an empty path segment in its instance name (an empty instance name has no leading slash)", cas.Clip(name))
		}
	}
	return nil, 0, fmt.Errorf("resource name %q has no blobs/ or uploads/ segment", cas.Clip(name))
}

// joinedLen is the length of segs joined by slashes: the segments of a
// name, at its start or its end, stand in it as they were split, so the
// name holds them joined (strings.Join would copy them).
func joinedLen(segs []string) int {
	n := len(segs) - 1
	for _, s := range segs {
		n += len(s)
	}
	return max(n, 0)
}

// parseBlob parses segs, which start at blobs or compressed-blobs, into
// rn.Compressor and rn.Digest, and returns the segments after the size.
func (rn *resourceName) parseBlob(name string, segs []string) ([]string, error) {
	rest := segs[1:]
	if segs[0] == "compressed-blobs" {
		if len(rest) == 0 || rest[0] == "" {
			return nil, fmt.Errorf("resource name %q: missing the compressor after compressed-blobs/", cas.Clip(name))
		}
		c := rest[0]
		switch {
		case c == "identity":
			return nil, fmt.Errorf("resource name %q: identity is not a compressor for compressed-blobs/; use blobs/", cas.Clip(name))
		case !compressors[c]:
			return nil, fmt.Errorf("resource name %q: unknown compressor %q", cas.Clip(name), cas.Clip(c))
		}
		rn.Compressor = c
		rest = rest[1:]
	}
	// The digest function's segment: REAPI wants it omitted for SHA-1,
	// SHA-256, SHA-384 and SHA-512 (inferred from the hash length) and
	// present for the others (BLAKE3); a client that names one of the
	// first four anyway is understood, its hash checked against it.
	f, named := cas.Function(0), false
	if len(rest) > 0 {
		if f, named = cas.FunctionNamed(rest[0]); named {
			rest = rest[1:]
		} else if digestFunctionsUnserved[rest[0]] {
			return nil, fmt.Errorf("resource name %q: digest function %s is not served here; this server speaks %s", cas.Clip(name), strings.ToUpper(rest[0]), cas.FunctionTitles())
		}
	}
	if len(rest) < 2 {
		return nil, fmt.Errorf("resource name %q: expected {hash}/{size} after %s/", cas.Clip(name), segs[0])
	}
	if !named {
		f = cas.FunctionOfLength(len(rest[0]))
	}
	if err := f.CheckHash(rest[0]); err != nil {
		return nil, fmt.Errorf("resource name %q: %w", cas.Clip(name), err)
	}
	size, err := cas.ParseSize(rest[1])
	if err != nil {
		return nil, fmt.Errorf("resource name %q: %w", cas.Clip(name), err)
	}
	rn.Digest = cas.Digest{Hash: rest[0], Size: size, Function: f}
	return rest[2:], nil
}

// uploadKey identifies an upload for resumption: the instance, uuid and
// digest. Metadata is left out, since servers may ignore it.
// (Compressed uploads are not kept for resumption.)
func (rn resourceName) uploadKey() string {
	var buf [256]byte // most keys fit: one allocation, the string
	b := append(append(append(append(buf[:0], rn.Instance...), "/uploads/"...), rn.UUID...), "/blobs/"...)
	if rn.Digest.Function != cas.SHA256 {
		b = append(append(b, rn.Digest.Function.String()...), '/')
	}
	return string(rn.Digest.AppendText(b))
}
