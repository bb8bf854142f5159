package reapi

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// stalledStreams is past the count at which, before the per-client
// share, 2,041 streams that sent a byte and
// stopped held the whole 256 MiB budget; 2,300 is past it.
const stalledStreams = 2300

// TestStalledUploadsOfOneClientDoNotStarveAnother is the stalled-upload
// attack: one client opens 2,300 ByteStream uploads that each send one
// byte (or nothing) and stop; another client's 200 KiB upload must
// succeed within a second, not wait for the stall timeout (a minute).
// Stalled streams hold no budget once their byte is stored, and whatever
// one client's streams reserve is bounded by its share.
func TestStalledUploadsOfOneClientDoNotStarveAnother(t *testing.T) {
	for _, sendByte := range []bool{true, false} {
		name := "one byte each"
		if !sendByte {
			name = "nothing"
		}
		t.Run(name, func(t *testing.T) {
			store := openTestStore(t, t.TempDir(), 0)
			srv, addr := serveOnLoopback(t, store, Options{MaxInflightUpload: 256 << 20, UploadStallTimeout: time.Minute}, nil)
			attacker := bspb.NewByteStreamClient(connectFrom(t, addr, net.IPv4(127, 0, 0, 1)))
			victim := bspb.NewByteStreamClient(connectFrom(t, addr, net.IPv4(127, 0, 0, 2)))

			ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
			defer cancel()
			stalledCtx, stop := context.WithCancel(ctx)
			defer stop()
			big := cas.Digest{Hash: cas.DigestOf([]byte("never finished")).Hash, Size: 2 << 20}
			for i := range stalledStreams {
				w, err := attacker.Write(stalledCtx)
				if err != nil {
					t.Fatal(err)
				}
				if sendByte {
					if err := w.Send(&bspb.WriteRequest{ResourceName: writeName("stalled"+strconv.Itoa(i), big), Data: []byte{1}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if sendByte {
				await.True(t, "every stalled upload to be open", func() bool { return srv.Stats().OpenUploads == stalledStreams })
			} else {
				await.True(t, "the stalled streams to take what budget they may", func() bool {
					return srv.Stats().InflightUploadBytes >= srv.Stats().MaxInflightUpload/2
				})
			}

			start := time.Now()
			inTime, cancelInTime := context.WithTimeout(ctx, time.Second)
			defer cancelInTime()
			if err := uploadBlob(inTime, victim, "victim", testblob.Random(200<<10, 44), 64<<10); err != nil {
				t.Fatalf("another client's 200 KiB upload beside %d stalled streams: %v after %v; held %d of %d bytes of budget", stalledStreams, err, time.Since(start), srv.Stats().InflightUploadBytes, srv.Stats().MaxInflightUpload)
			}
		})
	}
}
