package httpcache

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
)

// FuzzParseKeyedPath: an accepted path has a valid namespace and a key of
// non-empty segments, none . or .., no control character; written back
// with single slashes it parses to itself; and its record names it.
func FuzzParseKeyedPath(f *testing.F) {
	for _, p := range []string{"/sccache//.sccache_check", "/sccache//f/f/0/ff07bf2485083e509772fc8c9f1732e5ceeb3cc06200759b783d64d9ab787287",
		"/sccache//f/f/0/", "/gradle/9b4c0f5d2a8e4c1b9f3e7a6d5c4b3a29", "/gradle", "/", "/cas", "/ac/x", "/ns/a/../b", "/-x/y", "/ns/a\x00b", "//ns///k//", "/nx/1", "/turbo/slug=a/abc", "/maven/v1.1/g/a/c/buildinfo.xml"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		kp, err := parseKeyedPath(p)
		if err != nil {
			return
		}
		if checkNamespace(kp.namespace) != nil || kp.namespace == "cas" || kp.namespace == "ac" || kp.namespace == nxNamespace || kp.namespace == turboNamespace {
			t.Fatalf("parseKeyedPath(%q) accepted namespace %q", p, kp.namespace)
		}
		if kp.key == "" && !kp.collection {
			t.Fatalf("parseKeyedPath(%q): an entry with no key", p)
		}
		if kp.key != "" {
			for _, s := range strings.Split(kp.key, "/") {
				if s == "" || s == "." || s == ".." || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					t.Fatalf("parseKeyedPath(%q) accepted key %q", p, kp.key)
				}
			}
		}
		again := "/" + kp.namespace
		if kp.key != "" {
			again += "/" + kp.key
		}
		if kp.collection && kp.key != "" {
			again += "/"
		}
		if kp2, err := parseKeyedPath(again); err != nil || kp2 != kp {
			t.Fatalf("parseKeyedPath(%q) = %+v; written back as %q it parses to %+v, %v", p, kp, again, kp2, err)
		}
		rec := keyedRecord{content: cas.Digest{Hash: cas.EmptyHash}, modified: time.Unix(0, 1), namespace: kp.namespace, key: kp.key}
		if got, err := parseKeyedRecord(rec.marshal()); err != nil || !reflect.DeepEqual(got, rec) {
			t.Fatalf("the record of %+v reads back as %+v, %v", kp, got, err)
		}
	})
}

// FuzzParseKeyedRecord: whatever parses is what marshal writes, byte for
// byte: a record has one spelling.
func FuzzParseKeyedRecord(f *testing.F) {
	f.Add([]byte(recordMagic + cas.EmptyHash + " 0 1\ngradle\nkey\n"))
	f.Add([]byte(recordMagic + cas.EmptyHash + " 12 1764160450000000000\nsccache\na/b/c/d\n"))
	f.Add([]byte(recordMagic + cas.EmptyHash + " 012 1\nsccache\nk\n"))
	f.Add([]byte(recordMagic + cas.EmptyHash + " 1 1\nsccache\nk\nextra\n"))
	f.Add([]byte("membuf-keyed 2\n"))
	f.Add([]byte(recordMagicAttrs + cas.EmptyHash + " 4 1\nturbo\nslug=a/0153db43bf237595\nduration=545&tag=zJ5p\n"))
	f.Add([]byte(recordMagicAttrs + cas.EmptyHash + " 4 1\nturbo\nk\n\n"))
	abc := keyedRecord{content: cas.DigestOf([]byte("abc")), modified: time.Unix(0, 1), namespace: "nx", key: "1", inline: []byte("abc"), isInline: true}
	f.Add(abc.marshal())
	empty := keyedRecord{content: cas.Digest{Hash: cas.EmptyHash}, modified: time.Unix(0, 1), namespace: "nx", key: "2", inline: []byte{}, isInline: true}
	f.Add(empty.marshal())
	f.Add([]byte(recordMagicInline + cas.EmptyHash + " 0 1\nnx\n2\n\n")) // no CRC
	damaged := abc.marshal()
	damaged[len(damaged)-5] ^= 1 // the content's last byte
	f.Add(damaged)
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := parseKeyedRecord(b)
		if err != nil {
			return
		}
		if got := rec.marshal(); !bytes.Equal(got, b) {
			t.Fatalf("%q parsed to %+v, which marshals to %q", b, rec, got)
		}
	})
}
