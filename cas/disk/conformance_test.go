package disk_test

import (
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
			storagetest.Run(t, func(t *testing.T) cas.Storage {
				s, err := disk.OpenStore(t.TempDir(), 0, nil, form.opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}
