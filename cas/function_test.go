package cas_test

import (
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/membuf/membuf/cas"
)

// The published hashes of "" and "abc" under each function (FIPS 180-4's
// examples and BLAKE3's reference test vectors).
var knownHashes = []struct {
	f          cas.Function
	empty, abc string
}{
	{cas.SHA1, "da39a3ee5e6b4b0d3255bfef95601890afd80709", "a9993e364706816aba3e25717850c26c9cd0d89d"},
	{cas.SHA256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	{cas.SHA384, "38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b", "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"},
	{cas.SHA512, "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e", "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"},
	{cas.BLAKE3, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262", "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"},
}

func TestEveryFunctionHashesAsPublished(t *testing.T) {
	if len(knownHashes) != len(cas.Functions) {
		t.Fatalf("%d functions served, %d with known hashes here", len(cas.Functions), len(knownHashes))
	}
	for _, k := range knownHashes {
		if got := k.f.EmptyHash(); got != k.empty {
			t.Errorf("%s: empty hash %s, want %s", k.f, got, k.empty)
		}
		d := k.f.Digest([]byte("abc"))
		if d.Hash != k.abc || d.Size != 3 || d.Function != k.f {
			t.Errorf("%s: digest of abc %+v, want %s/3", k.f, d, k.abc)
		}
		if len(k.abc) != k.f.HashLen() {
			t.Errorf("%s: HashLen %d, published hash %d", k.f, k.f.HashLen(), len(k.abc))
		}
		empty := cas.Digest{Hash: k.empty, Function: k.f}
		if !empty.IsEmpty() {
			t.Errorf("%s: %+v is not the empty blob", k.f, empty)
		}
	}
	// A SHA-256 empty hash named as BLAKE3 is some other blob.
	if (cas.Digest{Hash: cas.EmptyHash, Function: cas.BLAKE3}).IsEmpty() {
		t.Error("SHA-256's empty hash under BLAKE3 is taken for the empty blob")
	}
}

func TestAFunctionIsKnownByItsEnumAndItsName(t *testing.T) {
	for _, f := range cas.Functions {
		got, err := cas.FunctionOf(f.Proto())
		if err != nil || got != f {
			t.Errorf("FunctionOf(%s) = %s, %v", f.Proto(), got, err)
		}
		got, ok := cas.FunctionNamed(f.String())
		if !ok || got != f {
			t.Errorf("FunctionNamed(%q) = %s, %v", f.String(), got, ok)
		}
		if strings.ToLower(f.Proto().String()) != f.String() {
			t.Errorf("name %q is not REAPI's %q in lower case", f.String(), f.Proto())
		}
	}
	for _, v := range []repb.DigestFunction_Value{repb.DigestFunction_MD5, repb.DigestFunction_VSO, repb.DigestFunction_UNKNOWN} {
		if f, err := cas.FunctionOf(v); err == nil {
			t.Errorf("FunctionOf(%s) = %s, want an error", v, f)
		} else if !strings.Contains(err.Error(), "BLAKE3") {
			t.Errorf("FunctionOf(%s): %v does not say what is served", v, err)
		}
	}
	if _, ok := cas.FunctionNamed("SHA256"); ok {
		t.Error("FunctionNamed takes an upper-case name; resource names are lower case")
	}
}

func TestARequestThatNamesNoFunctionIsInferredFromItsHash(t *testing.T) {
	for _, c := range []struct {
		v    repb.DigestFunction_Value
		hash string
		want cas.Function
	}{
		{repb.DigestFunction_UNKNOWN, strings.Repeat("a", 40), cas.SHA1},
		{repb.DigestFunction_UNKNOWN, strings.Repeat("a", 64), cas.SHA256},
		{repb.DigestFunction_UNKNOWN, strings.Repeat("a", 96), cas.SHA384},
		{repb.DigestFunction_UNKNOWN, strings.Repeat("a", 128), cas.SHA512},
		{repb.DigestFunction_UNKNOWN, "abc", cas.SHA256},
		{repb.DigestFunction_BLAKE3, strings.Repeat("a", 64), cas.BLAKE3},
		{repb.DigestFunction_SHA256, strings.Repeat("a", 40), cas.SHA256},
	} {
		got, err := cas.InferFunction(c.v, c.hash)
		if err != nil || got != c.want {
			t.Errorf("InferFunction(%s, %d digits) = %s, %v; want %s", c.v, len(c.hash), got, err, c.want)
		}
	}
}

func TestAHashOfTheWrongLengthNamesBothFunctionAndLength(t *testing.T) {
	_, err := cas.ParseDigestFor(cas.BLAKE3, &repb.Digest{Hash: strings.Repeat("a", 40), SizeBytes: 1})
	if err == nil || !strings.Contains(err.Error(), "BLAKE3") || !strings.Contains(err.Error(), "64") || !strings.Contains(err.Error(), "40") {
		t.Errorf("a 40-digit BLAKE3 hash: %v", err)
	}
	_, err = cas.ParseDigestFor(cas.SHA1, &repb.Digest{Hash: strings.Repeat("A", 40), SizeBytes: 1})
	if err == nil || !strings.Contains(err.Error(), "lowercase") {
		t.Errorf("an upper-case SHA-1 hash: %v", err)
	}
	d, err := cas.ParseDigestFor(cas.SHA512, &repb.Digest{Hash: strings.Repeat("0", 128), SizeBytes: 7})
	if err != nil || d.Function != cas.SHA512 || d.Size != 7 {
		t.Errorf("a SHA-512 digest: %+v, %v", d, err)
	}
}
