package disk

import (
	"context"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// Verification: a file verified once is trusted at the same modification time
// (its sums handed out without hashing), a forced check that finds rot
// removes the entry and counts it, and a verdict on a stale copy removes
// nothing.
func TestVerdictsOnAFile(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 0)
	ctx := context.Background()
	data := testblob.Random(100000, 3)
	d := cas.DigestOf(data)
	if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	e, _ := s.lookup(entryKey{Kind: kindCAS, Hash: d.Hash}, d.Size)

	check := func(force bool) ([]uint32, error) {
		f, err := s.blobFiles.open(&e)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sums, err := s.verifyFile(ctx, e, f, force, nil)
		return sums, s.actOn(err) // the store acts on the verdict
	}
	sums, err := check(false)
	if err != nil || sums == nil {
		t.Fatalf("check of a blob written here: sums %v, %v; want its sums", sums != nil, err)
	}
	if s.verifiedBytes != 0 {
		t.Errorf("verified %d bytes; want none hashed (checked on its way in)", s.verifiedBytes)
	}

	if err := s.dropCorrupt(entry{Key: e.Key, Gen: e.Gen + 1}, "a stale copy"); !errors.Is(err, errCorrupt) {
		t.Errorf("dropCorrupt: %v; want errCorrupt", err)
	}
	if !s.contains(d) || s.corrupt != 0 {
		t.Fatalf("a verdict on a stale copy removed the blob (corrupt %d)", s.corrupt)
	}

	disktest.FlipByte(t, disktest.BlobPath(s.dir, d), 5000, true) // bit rot: same modification time
	if _, err := check(false); err != nil {
		t.Errorf("unforced check after rot that kept the time: %v; want trusted", err)
	}
	if _, err := check(true); !errors.Is(err, errCorrupt) {
		t.Errorf("forced check of a rotten file: %v; want errCorrupt", err)
	}
	if s.contains(d) || s.corrupt != 1 || s.verifiedBytes != d.Size {
		t.Errorf("after the rot was found: present %v, corrupt %d, verified %d; want removed, 1, %d", s.contains(d), s.corrupt, s.verifiedBytes, d.Size)
	}
	// A read gives verdicts, which the store acts on, with read checks on;
	// none with WithoutReadChecks.
	other := testblob.Random(100000, 4)
	od := cas.DigestOf(other)
	if err := cas.Put(ctx, s, od, other, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, od)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*storedBlob); !ok {
		t.Errorf("no read check with read checks on: a %T", r)
	}
	r.Close()
	s.noReadChecks = true
	if r, err = s.Open(ctx, od); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*storedBlob); ok {
		t.Error("a read check with WithoutReadChecks")
	}
	r.Close()
}
