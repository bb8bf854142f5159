package packed

import (
	"context"
	"errors"
	"hash/crc32"
	"io"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
)

// crcBucket is a memory bucket that takes a pack's CRC-32C from the
// caller, and checks it as a store would.
type crcBucket struct {
	*memBucket
	mu           sync.Mutex
	calls, wrong int
}

func (c *crcBucket) WriteObjectCRC32C(ctx context.Context, name string, data []byte, crc uint32) error {
	c.mu.Lock()
	c.calls++
	if crc != crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) {
		c.wrong++
	}
	c.mu.Unlock()
	return c.memBucket.WriteObject(ctx, name, data)
}

// A pack goes to a bucket that takes its CRC-32C with the CRC-32C of its
// bytes, action results' headers included and the records whose bodies
// failed left out, computed as it was filled.
func TestAPacksCRC32CIsHandedToTheBucket(t *testing.T) {
	m := newMemBucket()
	c := &crcBucket{memBucket: m}
	b, err := New(Config{Objects: m.objects, Bucket: c, PackEntryBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var ups []tier.Upload
	for i := range 20 {
		ups = append(ups, blobUpload(testblob.Random(1000+i*300, uint64(i))))
	}
	result := []byte("an action result's bytes")
	ups = append(ups, uploadOf(tier.ActionKey(cas.DigestOf([]byte("an action"))), result))
	failing := testblob.Random(5000, 99)
	bad := blobUpload(failing)
	bad.Body = io.MultiReader(io.LimitReader(bad.Body, 2000), errReader{})
	ups = append(ups[:10], append([]tier.Upload{bad}, ups[10:]...)...)
	for i, err := range b.Put(context.Background(), ups) {
		if (err != nil) != (i == 10) {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	if c.calls != 1 || c.wrong != 0 {
		t.Fatalf("%d packs written with a CRC-32C, %d of them wrong; want 1, right", c.calls, c.wrong)
	}
	for i, up := range ups {
		if i == 10 {
			continue
		}
		if _, _, err := readAll(b, up.Key); err != nil {
			t.Fatalf("upload %d reads back: %v", i, err)
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the body failed") }
