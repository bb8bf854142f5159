package cas_test

import (
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
)

// A blob's digest, the name it is stored and served under, and the
// validation a digest from a client gets.
func ExampleDigestOf() {
	d := cas.DigestOf([]byte("hello"))
	fmt.Println(d)
	_, err := cas.ParseDigest(&repb.Digest{Hash: "ABC", SizeBytes: 5})
	fmt.Println(err)
	// Output:
	// 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824/5
	// hash "ABC" is 3 characters; a SHA-256 hash is 64 lowercase hex characters
}
