package grpcupstream_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// TestWriteShortBodyStoresNothing: a blob too large for a batch, whose
// body fails after 2 MiB of its ByteStream Write went up, is not stored
// (the suite's short body is small enough to be batched).
func TestWriteShortBodyStoresNothing(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	b := newBackend(t, "grpc://"+u.addr)
	data := pattern(3<<20, 9)
	k := tier.BlobKey(digestOf(data))
	up := upload(k, data)
	up.Body = io.MultiReader(bytes.NewReader(data[:2<<20]), errReader{errors.New("the disk failed")})
	u.callCounts()
	if err := b.Put(t.Context(), []tier.Upload{up})[0]; !errors.Is(err, cas.ErrUnavailable) {
		t.Fatalf("Put whose body fails after 2 MiB: %v, want cas.ErrUnavailable", err)
	}
	if n := u.callCounts()["/google.bytestream.ByteStream/Write"]; n != 1 {
		t.Fatalf("%d ByteStream Writes, want 1: the test is meant for that path", n)
	}
	sizes := []int64{0}
	if err := b.Stat(t.Context(), []tier.Key{k}, sizes); err != nil || sizes[0] != -1 {
		t.Fatalf("after a failed Put, Stat says %d, %v; want -1", sizes[0], err)
	}
	if _, err := b.Get(t.Context(), k, 0); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("after a failed Put, Get: %v, want cas.ErrNotFound", err)
	}
}

// TestWriteExisting: a large blob the upstream has already is answered
// early (committed_size) and is a success, without its body read whole.
func TestWriteExisting(t *testing.T) {
	u := startUpstream(t, serverConfig{})
	b := newBackend(t, "grpc://"+u.addr)
	data := pattern(8<<20, 10)
	k := tier.BlobKey(digestOf(data))
	if err := b.Put(t.Context(), []tier.Upload{upload(k, data)})[0]; err != nil {
		t.Fatal(err)
	}
	body := &countingReader{r: bytes.NewReader(data)}
	if err := b.Put(t.Context(), []tier.Upload{{Key: k, Body: body, Size: k.Size, SHA256: k.Hash}})[0]; err != nil {
		t.Fatalf("Put of a blob the upstream has: %v", err)
	}
	if body.n == k.Size {
		t.Fatalf("the upstream took the whole body again (%d bytes): the early answer was not tested", body.n)
	}
	if got, _ := read(t, b, k, 0); !bytes.Equal(got, data) {
		t.Fatal("the blob put twice reads back different")
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
