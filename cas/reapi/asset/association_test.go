package asset

import (
	"fmt"
	"slices"
	"testing"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	"github.com/membuf/membuf/cas"
)

// qualifierList decodes a fuzzer's bytes into qualifiers: each a byte of
// the name's length, the name, a byte of the value's length, the value
// (lengths cut to what is left), so that names and values hold any byte.
func qualifierList(b []byte) []*rapb.Qualifier {
	var qs []*rapb.Qualifier
	next := func() string {
		if len(b) == 0 {
			return ""
		}
		n := min(int(b[0]), len(b)-1)
		s := string(b[1 : 1+n])
		b = b[1+n:]
		return s
	}
	for len(b) > 0 {
		qs = append(qs, &rapb.Qualifier{Name: next(), Value: next()})
	}
	return qs
}

// canonical is what should name an association: the URI and the set of
// qualifiers, in no particular order.
func canonical(uri string, qs []*rapb.Qualifier) string {
	pairs := make([]string, len(qs))
	for i, q := range qs {
		pairs[i] = fmt.Sprintf("%q=%q", q.Name, q.Value)
	}
	slices.Sort(pairs)
	return fmt.Sprintf("%q %v", uri, pairs)
}

// TestAssociationKeyOfAQualifierHoldingNUL is an attack on Remote
// Asset: a push whose bazel.canonical_id value holds a NUL and
// "resource_type=x" named the association a fetch with those two
// qualifiers looks up.
func TestAssociationKeyOfAQualifierHoldingNUL(t *testing.T) {
	uri := "https://example.com/pkg.tar.gz"
	pushed := associationKey(uri, []*rapb.Qualifier{{Name: qualifierCanonicalID, Value: "y\x00resource_type=x"}}, cas.SHA256)
	fetched := associationKey(uri, []*rapb.Qualifier{{Name: qualifierCanonicalID, Value: "y"}, {Name: qualifierResourceType, Value: "x"}}, cas.SHA256)
	if pushed == fetched {
		t.Fatal("a qualifier value holding NUL names the association of two other qualifiers")
	}
	if a, b := associationKey("u\x00a=b", nil, cas.SHA256), associationKey("u", []*rapb.Qualifier{{Name: "a", Value: "b"}}, cas.SHA256); a == b {
		t.Fatal("a URI holding NUL names the association of a qualifier")
	}
	if a, b := associationKey(uri, []*rapb.Qualifier{{Name: "a=b", Value: "c"}}, cas.SHA256), associationKey(uri, []*rapb.Qualifier{{Name: "a", Value: "b=c"}}, cas.SHA256); a == b {
		t.Fatal("a name holding '=' names the association of another name")
	}
}

// FuzzAssociationKey: two requests name the same association only if
// they carry the same URI and the same qualifiers, in any order.
func FuzzAssociationKey(f *testing.F) {
	f.Add("u", []byte("\x12bazel.canonical_id\x12y\x00resource_type=x"), "u", []byte("\x12bazel.canonical_id\x01y\x0dresource_type\x01x"))
	f.Add("u\x00a=b", []byte{}, "u", []byte("\x01a\x01b"))
	f.Add("u", []byte("\x01a\x01b\x01c\x01d"), "u", []byte("\x01c\x01d\x01a\x01b"))
	f.Fuzz(func(t *testing.T, uri1 string, q1 []byte, uri2 string, q2 []byte) {
		a, b := qualifierList(q1), qualifierList(q2)
		same := canonical(uri1, a) == canonical(uri2, b)
		if (associationKey(uri1, a, cas.SHA256) == associationKey(uri2, b, cas.SHA256)) != same {
			t.Fatalf("%s and %s: the same key %v, the same request %v", canonical(uri1, a), canonical(uri2, b), !same, same)
		}
		if associationKey(uri1, a, cas.SHA256) == associationKey(uri2, b, cas.BLAKE3) {
			t.Fatalf("%s under SHA-256 and %s under BLAKE3: the same key", canonical(uri1, a), canonical(uri2, b))
		}
	})
}

// TestAssociationKeyNamesTheFunction: the same URI and qualifiers name one
// association per digest function, SHA-256's as before functions were
// named.
func TestAssociationKeyNamesTheFunction(t *testing.T) {
	uri, qs := "https://example.com/a.tar.gz", []*rapb.Qualifier{{Name: qualifierCanonicalID, Value: "a"}}
	seen := map[cas.Digest]cas.Function{}
	for _, f := range cas.Functions {
		k := associationKey(uri, qs, f)
		if g, ok := seen[k]; ok {
			t.Fatalf("%s and %s name one association", g.Title(), f.Title())
		}
		seen[k] = f
	}
}
