package disk_test

import (
	"context"
	"encoding/binary"
	"net"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
)

// BenchmarkFindMissingPacked: FindMissing of 100 present digests (and one
// absent) against a store of 100,000 packed 2 KiB blobs.
func BenchmarkFindMissingPacked(b *testing.B) {
	ctx := context.Background()
	s, err := disk.OpenStore(b.TempDir(), 0, nil, disk.WithPacks(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 100000
	ds := make([]cas.Digest, 0, n)
	batch, data := []cas.Digest{}, []net.Buffers{}
	for i := range n {
		blob := make([]byte, 2048)
		binary.LittleEndian.PutUint64(blob, uint64(i))
		d := cas.DigestOf(blob)
		ds = append(ds, d)
		batch, data = append(batch, d), append(data, net.Buffers{blob})
		if len(batch) == 100 {
			for _, err := range s.PutBatch(ctx, batch, data, nil) {
				if err != nil {
					b.Fatal(err)
				}
			}
			batch, data = batch[:0], data[:0]
		}
	}
	q := make([]cas.Digest, 101)
	q[100] = cas.DigestOf([]byte("absent"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range 100 {
			q[j] = ds[(i*7919+j*104729)%n]
		}
		i++
		missing, err := s.FindMissing(ctx, q, cas.ClientLookup)
		if err != nil || len(missing) != 1 {
			b.Fatal(missing, err)
		}
	}
}
