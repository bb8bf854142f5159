package reapi

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// openFDs counts the process's open file descriptors (Linux); the test is
// skipped where /proc/self/fd is not there.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors here: %v", err)
	}
	return len(ents) - 1 // the one ReadDir itself had open
}

// abandon starts an upload of d under name, sends its first n bytes and goes
// away: by closing its side without finish_write (polite) or by cancelling
// the stream once the server has the data (a client that died). It returns
// the error the client saw, if any.
func (e *testEnv) abandon(name string, data []byte, n int, cancel bool) error {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stream, err := e.bs.Write(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:n]}); err != nil {
		_, err = stream.CloseAndRecv()
		return err
	}
	if !cancel {
		_, err = stream.CloseAndRecv()
		return err
	}
	stop()
	_, err = stream.CloseAndRecv()
	if status.Code(err) == codes.Canceled {
		return nil
	}
	return err
}

// TestIdleUploadsHoldNoDescriptors: an interrupted upload kept for
// resumption holds its temporary file on disk but no descriptor; resuming
// it takes the file up again and stores the blob whole.
func TestIdleUploadsHoldNoDescriptors(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	before := openFDs(t)
	var blobs [][]byte
	for i := range 50 {
		data := testblob.Pattern(20000, byte(i))
		blobs = append(blobs, data)
		if err := e.abandon(writeName(fmt.Sprint("idle", i), cas.DigestOf(data)), data, 7000, false); err != nil {
			t.Fatal(err)
		}
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 50 {
		t.Fatalf("%d temporary files for 50 interrupted uploads", len(left))
	}
	if after := openFDs(t); after > before+2 {
		t.Errorf("50 idle uploads hold %d more descriptors; want none", after-before)
	}
	for i, data := range blobs {
		d := cas.DigestOf(data)
		resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName(fmt.Sprint("idle", i), d), WriteOffset: 7000, Data: data[7000:], FinishWrite: true})
		if err != nil || resp.CommittedSize != d.Size {
			t.Fatalf("resuming upload %d: %v, %v", i, resp, err)
		}
		if got, err := cas.ReadAll(context.Background(), e.store, d); err != nil || string(got) != string(data) {
			t.Fatalf("resumed blob %d: %v", i, err)
		}
	}
	if st := e.store.Stats(); st.PartialBytes != 0 {
		t.Errorf("PartialBytes after every upload finished: %d", st.PartialBytes)
	}
}

// TestOpenUploadsCapped: uploads streaming at once are capped; one more is
// RESOURCE_EXHAUSTED, saying why, and once one ends another may start.
func TestOpenUploadsCapped(t *testing.T) {
	e := newEnv(t, 0, Options{MaxOpenUploads: 2})
	ctx := context.Background()
	data := testblob.Pattern(10000, 1)
	stored := testblob.Pattern(3000, 2)
	storedDigest := e.put(stored)
	var streams []bspb.ByteStream_WriteClient
	for i := range 2 {
		d := cas.DigestOf(append([]byte{byte(i)}, data...))
		name := writeName(fmt.Sprint("open", i), d)
		s, err := e.bs.Write(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&bspb.WriteRequest{ResourceName: name, Data: data[:100]}); err != nil {
			t.Fatal(err)
		}
		e.waitCommitted(name, 100)
		streams = append(streams, s)
	}
	_, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("third", cas.DigestOf(data)), Data: data, FinishWrite: true})
	wantCode(t, err, codes.ResourceExhausted, "too many uploads in progress (2, the server's limit)")
	// An upload of a stored blob needs no slot: it is answered at once.
	if resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("again", storedDigest), Data: stored, FinishWrite: true}); err != nil || resp.CommittedSize != storedDigest.Size {
		t.Errorf("upload of a stored blob with every slot taken: %v, %v", resp, err)
	}
	streams[0].CloseAndRecv()
	await.True(t, "a slot to free", func() bool {
		_, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("third", cas.DigestOf(data)), Data: data, FinishWrite: true})
		return err == nil
	})
	streams[1].CloseAndRecv()
}

// TestKeptUploadsCapped: past the cap of idle uploads kept for
// resumption, the least recently active is discarded with its file.
func TestKeptUploadsCapped(t *testing.T) {
	e := newFileEnv(t, 0, Options{MaxKeptUploads: 3})
	var names []string
	for i := range 5 {
		data := testblob.Pattern(1000, byte(i))
		name := writeName(fmt.Sprint("kept", i), cas.DigestOf(data))
		names = append(names, name)
		if err := e.abandon(name, data, 10, false); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range names {
		_, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: name})
		if kept := i >= 2; kept != (err == nil) {
			t.Errorf("upload %d (of 5, cap 3): QueryWriteStatus %v; want kept=%v", i, err, kept)
		}
	}
	if left := disktest.TmpFiles(t, e.dir); len(left) != 3 {
		t.Errorf("temporary files: %d; want the 3 kept", len(left))
	}
	if st := e.store.Stats(); st.PartialBytes != 30 {
		t.Errorf("PartialBytes with 3 uploads of 10 bytes kept: %d", st.PartialBytes)
	}
	if st := e.srv.Stats(); st.KeptUploads != 3 || st.OpenUploads != 0 {
		t.Errorf("ServerStats: %d kept, %d open; want 3 and 0", st.KeptUploads, st.OpenUploads)
	}
}

// TestPartialUploadsCountTowardsMaxSize: bytes of uploads in progress
// evict stored blobs like committed bytes do, the disk never holds more
// than the maximum size, and when uploads alone would exceed it the next
// write is RESOURCE_EXHAUSTED.
func TestPartialUploadsCountTowardsMaxSize(t *testing.T) {
	const max = 1 << 20
	e := newEnv(t, max, Options{})
	old := e.put(testblob.Pattern(600<<10, 1))
	big := testblob.Pattern(900<<10, 2)
	if err := e.abandon(writeName("big", cas.DigestOf(big)), big, 500<<10, false); err != nil {
		t.Fatal(err)
	}
	st := e.store.Stats()
	if st.PartialBytes != 500<<10 || st.Bytes+st.PartialBytes > max {
		t.Fatalf("after a 500KiB partial upload beside a 600KiB blob, store of 1MiB: %+v", st)
	}
	if ok, _ := cas.Contains(context.Background(), e.store, old); ok {
		t.Error("the stored blob was not evicted to make space for the upload")
	}
	other := testblob.Pattern(900<<10, 3)
	err := e.abandon(writeName("other", cas.DigestOf(other)), other, 600<<10, false)
	wantCode(t, err, codes.ResourceExhausted, "taken by uploads in progress")
	if st := e.store.Stats(); st.Bytes+st.PartialBytes > max {
		t.Fatalf("store over its maximum: %+v", st)
	}
	// Finishing the first upload turns its reservation into a blob.
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: writeName("big", cas.DigestOf(big)), WriteOffset: 500 << 10, Data: big[500<<10:], FinishWrite: true})
	if err != nil || resp.CommittedSize != int64(len(big)) {
		t.Fatalf("finishing the upload: %v, %v", resp, err)
	}
	if st := e.store.Stats(); st.PartialBytes != 0 || st.Bytes != int64(len(big)) {
		t.Errorf("after the upload finished: %+v; want its bytes stored, none reserved", st)
	}
}

// TestAbandonedUploadsSoak: 20,000 uploads that each send one chunk and go
// away (half close their side, half are cancelled), then 1,000 normal
// uploads. No RPC is INTERNAL, every normal upload is stored, and the
// descriptors the server holds stay bounded: at most one per upload being
// streamed (the test streams at most `workers` at once), none for the
// uploads kept idle (at most DefaultMaxKeptUploads of them).
func TestAbandonedUploadsSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test")
	}
	const (
		abandoned = 20000
		normal    = 1000
		workers   = 32
	)
	// On the path `membuf serve` runs only: the soak is the one test
	// here too costly to run twice.
	e := newZeroCopyEnv(t, 0, Options{})
	baseline := openFDs(t)
	var peak atomic.Int64
	sample := func() {
		if n := int64(openFDs(t)); n > peak.Load() {
			peak.Store(n)
		}
	}
	var internal, otherErrs atomic.Int64
	var firstErr atomic.Value
	note := func(err error) {
		if err == nil {
			return
		}
		if status.Code(err) == codes.Internal {
			internal.Add(1)
		} else {
			otherErrs.Add(1)
		}
		firstErr.CompareAndSwap(nil, err.Error())
	}
	run := func(n int, job func(i int) error) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					note(job(i))
					if i%500 == 0 {
						sample()
					}
				}
			})
		}
		wg.Wait()
	}
	chunk := testblob.Pattern(4096, 1)
	run(abandoned, func(i int) error {
		data := append([]byte(fmt.Sprint(i, ":")), chunk...)
		return e.abandon(writeName(fmt.Sprint("gone", i), cas.DigestOf(data)), data, 1024, i%2 == 1)
	})
	// The cancelled streams end on the server a moment after the client
	// sees them end; wait until none is still streaming.
	await.True(t, "the abandoned streams to end on the server", func() bool {
		open, _ := e.srv.uploads.Counts()
		return open == 0
	})
	_, kept := e.srv.uploads.Counts()
	idleFDs := openFDs(t) - baseline
	run(normal, func(i int) error {
		data := testblob.Pattern(8192+i, byte(i))
		d := cas.DigestOf(data)
		n, err := e.write(writeName(fmt.Sprint("normal", i), d), data, 4096)
		if err == nil && n != d.Size {
			err = fmt.Errorf("upload %d committed %d of %d bytes", i, n, d.Size)
		}
		if err == nil {
			if ok, _ := cas.Contains(context.Background(), e.store, d); !ok {
				err = fmt.Errorf("upload %d succeeded but the blob is not stored", i)
			}
		}
		return err
	})
	sample()
	t.Logf("%d abandoned + %d normal uploads: %d kept idle with %d descriptors over the %d at start; peak %d descriptors sampled; %d INTERNAL, %d other errors (first: %v); %d goroutines",
		abandoned, normal, kept, idleFDs, baseline, peak.Load(), internal.Load(), otherErrs.Load(), firstErr.Load(), runtime.NumGoroutine())
	if internal.Load() != 0 || otherErrs.Load() != 0 {
		t.Errorf("%d INTERNAL and %d other errors; want none (first: %v)", internal.Load(), otherErrs.Load(), firstErr.Load())
	}
	if kept != DefaultMaxKeptUploads {
		t.Errorf("%d uploads kept idle; want the cap, %d", kept, DefaultMaxKeptUploads)
	}
	// Slack for the store's own: its active pack segments (one for each
	// of its four lanes) and the runtime's.
	if idleFDs > 8 {
		t.Errorf("%d idle uploads hold %d descriptors; want none", kept, idleFDs)
	}
	// Streams and their files: at most one temporary file per upload
	// streamed at once, plus the connection's sockets and slack for the
	// runtime's own.
	if bound := int64(baseline + workers + 16); peak.Load() > bound {
		t.Errorf("peak of %d descriptors; want at most %d (%d at start + one per upload streamed at once + 16)", peak.Load(), bound, baseline)
	}
}
