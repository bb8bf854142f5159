// Package backendtest is the conformance suite every tier.Backend passes
// (Run), and Memory, a Backend in memory for the tier's own tests.
//
// A backend's test calls Run with a fresh backend (an emulator or a real
// upstream on loopback) and says what the backend can do:
//
//	backendtest.Run(t, func(t *testing.T) tier.Backend { return newBackend(t) }, backendtest.Options{
//		KeepsChecksums: true, // an object store: the SHA-256 Put is given comes back from Get
//		ResolvesHashes: true, // Stat of a blob named by its hash alone finds its size
//	})
package backendtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
)

// Options says what a backend can do, so that Run checks it.
type Options struct {
	// KeepsChecksums: Get returns the SHA-256 Put was given (an object
	// store's metadata); otherwise it returns tier.Unchecked.
	KeepsChecksums bool
	// ResolvesHashes: Stat of a blob key whose Size is -1 finds the
	// blob's size; otherwise it answers -1.
	ResolvesHashes bool
	// Outage, if not nil, takes the backend down (down true) or brings it
	// back, so that Run checks that requests fail with cas.ErrUnavailable
	// meanwhile and succeed after (stopping and restarting an emulator).
	Outage func(t *testing.T, down bool)
}

// Run runs the suite, a subtest per check, each with a fresh backend.
func Run(t *testing.T, newBackend func(t *testing.T) tier.Backend, opts Options) {
	t.Run("Probe", func(t *testing.T) {
		if err := newBackend(t).Probe(ctx(t)); err != nil {
			t.Fatalf("Probe of a backend that answers: %v", err)
		}
	})
	t.Run("Absent", func(t *testing.T) {
		b := newBackend(t)
		d := digestOf(testblob.Random(100, 1))
		_, err := b.Get(ctx(t), tier.BlobKey(d), 0)
		if !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("Get of an absent blob: %v, want an error wrapping cas.ErrNotFound", err)
		}
		_, err = b.Get(ctx(t), tier.ActionKey(d), 0)
		if !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("Get of an absent action result: %v, want an error wrapping cas.ErrNotFound", err)
		}
		sizes := []int64{7}
		if err := b.Stat(ctx(t), []tier.Key{tier.BlobKey(d)}, sizes); err != nil {
			t.Fatalf("Stat of an absent blob: %v", err)
		}
		if sizes[0] != -1 {
			t.Fatalf("Stat of an absent blob: size %d, want -1", sizes[0])
		}
	})
	t.Run("BlobRoundTrip", func(t *testing.T) {
		b := newBackend(t)
		for _, size := range []int{1, 4 << 10, 3<<20 + 17} {
			data := testblob.Random(size, uint64(size))
			d := digestOf(data)
			put(t, b, tier.BlobKey(d), data)
			got, obj := get(t, b, tier.BlobKey(d), 0)
			if !bytes.Equal(got, data) || obj.Size != int64(size) {
				t.Fatalf("Get of a %d-byte blob: %d bytes (Size %d), equal %v", size, len(got), obj.Size, bytes.Equal(got, data))
			}
			off := int64(size) / 3
			got, obj = get(t, b, tier.BlobKey(d), off)
			if !bytes.Equal(got, data[off:]) || obj.Size != int64(size) {
				t.Fatalf("Get of a %d-byte blob from %d: %d bytes (Size %d), want the %d after the offset", size, off, len(got), obj.Size, int64(size)-off)
			}
			got, _ = get(t, b, tier.BlobKey(d), int64(size))
			if len(got) != 0 {
				t.Fatalf("Get of a %d-byte blob from its end: %d bytes, want none", size, len(got))
			}
			if opts.KeepsChecksums && obj.SHA256 != d.Hash {
				t.Fatalf("Get of a blob: SHA256 %q, want the sum it was put with, %q", obj.SHA256, d.Hash)
			}
		}
	})
	t.Run("PutTwice", func(t *testing.T) {
		b := newBackend(t)
		data := testblob.Random(1000, 2)
		d := digestOf(data)
		put(t, b, tier.BlobKey(d), data)
		put(t, b, tier.BlobKey(d), data)
		if got, _ := get(t, b, tier.BlobKey(d), 0); !bytes.Equal(got, data) {
			t.Fatal("a blob put twice reads back different")
		}
	})
	t.Run("ActionResultReplaced", func(t *testing.T) {
		b := newBackend(t)
		action := digestOf([]byte("an action"))
		k := tier.ActionKey(action) // with the action's size, as an upstream REAPI cache keys it
		v1, v2 := actionResult("the first result"), actionResult("the second, longer result")
		put(t, b, k, v1)
		put(t, b, k, v2)
		got, obj := get(t, b, k, 0)
		if !bytes.Equal(got, v2) {
			t.Fatalf("action result after a second Put: %x, want %x", got, v2)
		}
		want := tier.Unchecked
		if opts.KeepsChecksums {
			want = sum(v2)
		}
		if obj.SHA256 != want {
			t.Fatalf("action result's SHA256: %q, want %q", obj.SHA256, want)
		}
		// A blob and an action result of the same hash are different
		// entries.
		sizes := []int64{0}
		if err := b.Stat(ctx(t), []tier.Key{tier.BlobKey(cas.Digest{Hash: action.Hash, Size: int64(len(v2))})}, sizes); err != nil || sizes[0] != -1 {
			t.Fatalf("Stat of a blob whose hash is an action result's: size %d, %v; want -1", sizes[0], err)
		}
	})
	t.Run("StatMany", func(t *testing.T) {
		b := newBackend(t)
		var ks []tier.Key
		var want []int64
		for i := range 60 {
			data := testblob.Random(100+i, uint64(1000+i))
			k := tier.BlobKey(digestOf(data))
			ks = append(ks, k)
			if i%3 == 0 {
				put(t, b, k, data)
				want = append(want, int64(len(data)))
			} else {
				want = append(want, -1)
			}
		}
		sizes := make([]int64, len(ks))
		if err := b.Stat(ctx(t), ks, sizes); err != nil {
			t.Fatalf("Stat of %d keys: %v", len(ks), err)
		}
		for i := range ks {
			if sizes[i] != want[i] {
				t.Fatalf("Stat of key %d (%s): %d, want %d", i, ks[i], sizes[i], want[i])
			}
		}
		// By hash alone.
		k := ks[0]
		k.Size = -1
		if err := b.Stat(ctx(t), []tier.Key{k}, sizes[:1]); err != nil {
			t.Fatalf("Stat of a blob by its hash alone: %v", err)
		}
		w := int64(-1)
		if opts.ResolvesHashes {
			w = want[0]
		}
		if sizes[0] != w {
			t.Fatalf("Stat of a blob by its hash alone: %d, want %d", sizes[0], w)
		}
	})
	t.Run("ShortBodyStoresNothing", func(t *testing.T) {
		b := newBackend(t)
		data := testblob.Random(64<<10, 3)
		d := digestOf(data)
		body := io.MultiReader(bytes.NewReader(data[:1000]), failingReader{})
		if err := b.Put(ctx(t), []tier.Upload{{Key: tier.BlobKey(d), Body: body, Size: d.Size, SHA256: d.Hash}})[0]; err == nil {
			t.Fatal("Put whose body fails after 1,000 bytes succeeded")
		}
		sizes := []int64{0}
		if err := b.Stat(ctx(t), []tier.Key{tier.BlobKey(d)}, sizes); err != nil || sizes[0] != -1 {
			t.Fatalf("after a failed Put, Stat says %d, %v; want -1 (nothing stored)", sizes[0], err)
		}
		if _, err := b.Get(ctx(t), tier.BlobKey(d), 0); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("after a failed Put, Get: %v, want cas.ErrNotFound", err)
		}
	})
	t.Run("PutMany", func(t *testing.T) {
		// A batch as the tier hands one over: small blobs and an action
		// result together, one of them failing, which must cost only
		// that one.
		b := newBackend(t)
		var uploads []tier.Upload
		var datas [][]byte
		for i := range 20 {
			data := testblob.Random(200+i*37, uint64(2000+i))
			datas = append(datas, data)
			uploads = append(uploads, upload(data))
		}
		bad := testblob.Random(300, 3000)
		uploads[7] = tier.Upload{Key: tier.BlobKey(digestOf(bad)), Body: io.MultiReader(bytes.NewReader(bad[:10]), failingReader{}), Size: int64(len(bad)), SHA256: sum(bad)}
		result := actionResult("an action result in a batch")
		action := tier.ActionKey(digestOf([]byte("a batched action")))
		uploads = append(uploads, tier.Upload{Key: action, Body: bytes.NewReader(result), Size: int64(len(result)), SHA256: sum(result)})
		errs := b.Put(ctx(t), uploads)
		if len(errs) != len(uploads) {
			t.Fatalf("Put of %d uploads returned %d errors", len(uploads), len(errs))
		}
		for i, err := range errs {
			if (err != nil) != (i == 7) {
				t.Fatalf("Put of a batch: upload %d: %v (only upload 7's body fails)", i, err)
			}
		}
		for i, data := range datas {
			if i == 7 {
				continue
			}
			if got, _ := get(t, b, uploads[i].Key, 0); !bytes.Equal(got, data) {
				t.Fatalf("blob %d of a batch reads back different", i)
			}
		}
		if got, _ := get(t, b, action, 0); !bytes.Equal(got, result) {
			t.Fatalf("the action result of a batch reads back %x", got)
		}
		sizes := []int64{0}
		if err := b.Stat(ctx(t), []tier.Key{tier.BlobKey(digestOf(bad))}, sizes); err != nil || sizes[0] != -1 {
			t.Fatalf("the failed upload of a batch: Stat says %d, %v; want -1", sizes[0], err)
		}
	})
	t.Run("Canceled", func(t *testing.T) {
		b := newBackend(t)
		c, cancel := context.WithCancel(ctx(t))
		cancel()
		d := digestOf(testblob.Random(10, 4))
		if _, err := b.Get(c, tier.BlobKey(d), 0); err == nil {
			t.Fatal("Get with a canceled context succeeded")
		} else if errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("Get with a canceled context: %v, a miss rather than a failure", err)
		}
	})
	if opts.Outage != nil {
		t.Run("Outage", func(t *testing.T) {
			b := newBackend(t)
			data := testblob.Random(5000, 5)
			d := digestOf(data)
			put(t, b, tier.BlobKey(d), data)
			opts.Outage(t, true)
			c, cancel := context.WithTimeout(ctx(t), 5*time.Second)
			defer cancel()
			if _, err := b.Get(c, tier.BlobKey(d), 0); !errors.Is(err, cas.ErrUnavailable) {
				t.Errorf("Get while the backend is down: %v, want cas.ErrUnavailable", err)
			}
			other := testblob.Random(5000, 6)
			if err := b.Put(c, []tier.Upload{upload(other)})[0]; !errors.Is(err, cas.ErrUnavailable) {
				t.Errorf("Put while the backend is down: %v, want cas.ErrUnavailable", err)
			}
			if err := b.Probe(c); err == nil {
				t.Error("Probe while the backend is down succeeded")
			}
			opts.Outage(t, false)
			if got, _ := get(t, b, tier.BlobKey(d), 0); !bytes.Equal(got, data) {
				t.Fatal("after the outage, a blob put before it reads back different")
			}
		})
	}
}

// actionResult is a serialized ActionResult whose stdout is text: what a
// tier stores as an action result, and all an upstream cache accepts as
// one.
func actionResult(stdout string) []byte {
	data, err := proto.Marshal(&repb.ActionResult{StdoutRaw: []byte(stdout)})
	if err != nil {
		panic(err)
	}
	return data
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func put(t *testing.T, b tier.Backend, k tier.Key, data []byte) {
	t.Helper()
	if err := b.Put(ctx(t), []tier.Upload{{Key: k, Body: bytes.NewReader(data), Size: int64(len(data)), SHA256: sum(data)}})[0]; err != nil {
		t.Fatalf("Put of %s: %v", k, err)
	}
}

func upload(data []byte) tier.Upload {
	return tier.Upload{Key: tier.BlobKey(digestOf(data)), Body: bytes.NewReader(data), Size: int64(len(data)), SHA256: sum(data)}
}

func get(t *testing.T, b tier.Backend, k tier.Key, off int64) ([]byte, tier.Object) {
	t.Helper()
	obj, err := b.Get(ctx(t), k, off)
	if err != nil {
		t.Fatalf("Get of %s from %d: %v", k, off, err)
	}
	defer obj.Body.Close()
	data, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatalf("reading %s from %d: %v", k, off, err)
	}
	return data, obj
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func digestOf(data []byte) cas.Digest {
	return cas.Digest{Hash: sum(data), Size: int64(len(data))}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) {
	return 0, errors.New("the body failed")
}
