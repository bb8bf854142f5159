package disk_test

import (
	"context"
	"net"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/storagetest"
)

// The disk store keeps the cas.Storage contract in each of its forms:
// small blobs packed (the default), every blob a file of its own, and
// every blob kept compressed.
func TestStorageConformance(t *testing.T) {
	for _, form := range []struct {
		name string
		opts []disk.StoreOption
	}{
		{"packs", nil},
		{"files", []disk.StoreOption{disk.WithPacks(0)}},
		{"compressed", []disk.StoreOption{disk.WithPacks(0), disk.WithCompression(disk.Compression{Policy: disk.CompressAll})}},
	} {
		t.Run(form.name, func(t *testing.T) {
			open := func(t *testing.T) cas.Storage {
				s, err := disk.OpenStore(t.TempDir(), 0, nil, form.opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			storagetest.Run(t, open)
			t.Run("functions", func(t *testing.T) { storagetest.RunFunctions(t, open) })
		})
	}
	// cas.PutEach, the plain PutBatch of a Storage with no cheaper way,
	// keeps the contract too: the disk store with its batches that way.
	t.Run("put-each", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) cas.Storage {
			s, err := disk.OpenStore(t.TempDir(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return putEach{s}
		})
	})
}

// putEach is a disk store whose PutBatch is cas.PutEach.
type putEach struct{ *disk.Store }

func (p putEach) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	return cas.PutEach(ctx, p, ds, data, arrived)
}
