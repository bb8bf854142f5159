package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/s3"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/miniotest"
)

// membuf bucket prints a bucket's layout as it changes: empty, the
// per-object layout found in what it holds, then packs once converted;
// a layout it cannot convert to is a usage error.
func TestBucketCommand(t *testing.T) {
	m := miniotest.Start(t)
	for _, kv := range m.Env(t.TempDir()) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	url := m.URL("cmd")
	bucket := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := runCLI(t, ctx, append([]string{"bucket"}, append(args, url)...)...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("membuf bucket %v: exit %d, %q, %q; want %q", args, code, out, errOut, want)
		}
	}
	bucket("empty")
	loc, err := s3.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s3.New(ctx, s3.Config{Location: loc, Concurrency: 1, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("an entry of the per-object layout")
	d := cas.DigestOf(data)
	if err := b.Put(ctx, []tier.Upload{{Key: tier.BlobKey(d), Body: bytes.NewReader(data), Size: d.Size, SHA256: d.Hash}})[0]; err != nil {
		t.Fatal(err)
	}
	bucket("objects (found")
	if code, _, errOut := runCLI(t, ctx, "bucket", "--convert-to", "objects", url); code != 2 || !strings.Contains(errOut, "want packs") {
		t.Fatalf("--convert-to objects: exit %d, %q; want a usage error", code, errOut)
	}
	bucket("was objects", "--convert-to", "packs")
	bucket("packs (format 1, recorded")
	if code, _, errOut := runCLI(t, ctx, "bucket", url+"&packs=true"); code == 0 || !strings.Contains(errOut, "without packs=") {
		t.Fatalf("a URL with packs=: exit %d, %q; want an error", code, errOut)
	}
}
