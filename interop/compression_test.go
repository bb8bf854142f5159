package interop

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/client"
	"github.com/bazelbuild/remote-apis-sdks/go/pkg/digest"
	"google.golang.org/grpc/codes"
)

// textBlob returns n bytes of source-like text (compressible about
// fourfold), different for each seed.
func textBlob(n int, seed int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "func f%d_%d(buf []byte) (int, error) {\n\treturn copy(buf, \"%d\"), nil\n}\n\n", seed, i, i*7919%100003)
	}
	return b.Bytes()[:n]
}

func TestSDKCompressed(t *testing.T) { eachTopology(t, testSDKCompressed) }

// testSDKCompressed runs the REAPI SDK with compression on (its
// CompressedBytestreamThreshold option: every ByteStream transfer of 0
// bytes or more goes as compressed-blobs/zstd, and batches compress too,
// since the server advertises zstd for them): blobs of 0 B, 1 KiB, 5 MiB
// and 64 MiB go up compressed and come back compressed, whole and from
// offsets.
func testSDKCompressed(t *testing.T, startServer startFunc) {
	ctx := testContext(t)
	srv := startServer(t, t.TempDir())
	c := dialClient(t, ctx, srv.Dial, instance, client.CompressedBytestreamThreshold(0))
	plain := dialClient(t, ctx, srv.Dial, instance)

	blobs := map[string][]byte{
		"0 B":          {},
		"1 KiB":        textBlob(1<<10, 1),
		"5 MiB":        textBlob(5<<20, 2),
		"64 MiB":       textBlob(64<<20, 3),
		"5 MiB random": randomBlob(t, 5<<20),
	}
	for name, data := range blobs {
		t.Run(name, func(t *testing.T) {
			dg, err := c.WriteBlob(ctx, data)
			if err != nil {
				t.Fatalf("WriteBlob: %v", err)
			}
			got, stats, err := c.ReadBlob(ctx, dg)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadBlob: %d bytes, %v", len(got), err)
			}
			if len(data) >= 1<<20 && !strings.Contains(name, "random") && stats.RealMoved*2 > stats.LogicalMoved {
				t.Errorf("ReadBlob moved %d bytes on the wire for %d: not compressed", stats.RealMoved, stats.LogicalMoved)
			}
			// The same blob read by a client without compression.
			if got, _, err := plain.ReadBlob(ctx, dg); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("ReadBlob without compression: %d bytes, %v", len(got), err)
			}
			size := int64(len(data))
			// Ranged reads: compressed reads take an offset into the blob
			// and run to its end.
			for _, off := range []int64{1, 255 << 10, 256 << 10, 256<<10 + 1, size / 2, size - 1, size} {
				if off < 0 || off > size {
					continue
				}
				got, _, err := c.ReadBlobRange(ctx, dg, off, 0)
				if err != nil || !bytes.Equal(got, data[off:]) {
					t.Fatalf("ReadBlobRange(offset %d, no limit): %d bytes, %v", off, len(got), err)
				}
			}
			if size > 0 {
				// A limit on a compressed read is INVALID_ARGUMENT
				// (remote_execution.proto); the SDK sends one with its
				// compressed name, so limited ranges are for clients
				// without compression.
				_, _, err := c.ReadBlobRange(ctx, dg, 0, 1)
				wantCode(t, "ReadBlobRange with a limit, compressed", err, codes.InvalidArgument)
				off, limit := size/3, max(size/3, 1)
				got, _, err := plain.ReadBlobRange(ctx, dg, off, limit)
				if err != nil || !bytes.Equal(got, data[off:min(off+limit, size)]) {
					t.Fatalf("ReadBlobRange(offset %d, limit %d) without compression: %v", off, limit, err)
				}
			}
			// Again: the blob is there, the upload ends at once.
			if _, err := c.WriteBlob(ctx, data); err != nil {
				t.Fatalf("WriteBlob of a blob already stored: %v", err)
			}
		})
	}

	t.Run("batches", func(t *testing.T) {
		batch := map[digest.Digest][]byte{}
		for i := range 20 {
			b := textBlob(2000+i*300, 10+i)
			batch[digest.NewFromBlob(b)] = b
		}
		if err := c.BatchWriteBlobs(ctx, batch); err != nil {
			t.Fatalf("BatchWriteBlobs with compression: %v", err)
		}
		var dgs []digest.Digest
		for dg := range batch {
			dgs = append(dgs, dg)
		}
		got, err := c.BatchDownloadBlobs(ctx, dgs)
		if err != nil {
			t.Fatalf("BatchDownloadBlobs with compression: %v", err)
		}
		for dg, b := range batch {
			if !bytes.Equal(got[dg], b) {
				t.Errorf("blob %v came back as %d bytes, want %d", dg, len(got[dg]), len(b))
			}
		}
	})
}
