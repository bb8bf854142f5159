package zstdseek

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/testenv"
)

// mustZstdPool returns NewPool(budget): with the reserve it computes.
func mustZstdPool(t testing.TB, budget int64) *Pool {
	t.Helper()
	p, err := NewPool(budget)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newTestZstdPool returns a pool of budget bytes with no reserve for frame
// coders, so that the figures of a test do not depend on the CPU count.
func newTestZstdPool(t testing.TB, budget int64) *Pool {
	t.Helper()
	return newZstdPool(budget, 0)
}

func TestZstdFrameRoundTrip(t *testing.T) {
	p := newTestZstdPool(t, 64<<20)
	ctx := context.Background()
	for _, n := range []int{0, 1, 1000, 4096, FrameSize - 1, FrameSize} {
		data := testblob.Text(n, byte(n))
		fb, err := p.EncodeFrame(ctx, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		frame := fb.Bytes()
		if len(frame) > maxEncodedSize(n) {
			t.Fatalf("%d bytes encoded to %d, over maxEncodedSize %d", n, len(frame), maxEncodedSize(n))
		}
		got, err := p.DecodeFrame(ctx, frame, make([]byte, 0, n))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: decoded %d bytes, err %v", n, len(got), err)
		}
	}
	st := p.Stats()
	if st.Created["encoder"] != 1 || st.Created["frame_decoder"] != 1 || st.Leases["encoder"] != 6 {
		t.Fatalf("one encoder and one decoder should have served every frame: %+v", st)
	}
	if st.LentBytes != 0 || st.IdleBytes != encoderCharge+frameDecoderCharge {
		t.Fatalf("after the calls: %d bytes lent, %d idle; want 0 and both coders idle", st.LentBytes, st.IdleBytes)
	}
}

// TestZstdDecodeFrameStopsAtCapacity: a frame that expands past the
// capacity it is given is an error, found within a block of the capacity.
func TestZstdDecodeFrameStopsAtCapacity(t *testing.T) {
	p := newTestZstdPool(t, 64<<20)
	ctx := context.Background()
	bomb := make([]byte, 16<<20) // zeros: a few KiB compressed
	frame := testblob.CompressStream(t, bomb, 1<<20)
	if len(frame) > 64<<10 {
		t.Fatalf("%d MiB of zeros compressed to %d bytes; the test wants a bomb", len(bomb)>>20, len(frame))
	}
	dst := make([]byte, 0, 1<<20)
	got, err := p.DecodeFrame(ctx, frame, dst)
	if !errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		t.Fatalf("decoding %d bytes into a capacity of %d: err %v, want ErrDecoderSizeExceeded", len(bomb), cap(dst), err)
	}
	// The decoder checks after each block, so it may overrun by one.
	if len(got) > cap(dst)+zstdBlockMax {
		t.Fatalf("the decoder went on to %d bytes before stopping", len(got))
	}
}

func TestZstdDecodeStream(t *testing.T) {
	p := newTestZstdPool(t, 64<<20)
	data := testblob.Text(3<<20+17, 3)
	var out bytes.Buffer
	n, err := p.DecodeStream(context.Background(), 1<<20, bytes.NewReader(testblob.CompressStream(t, data, 1<<20)), &out)
	if err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("decoded %d bytes, err %v", n, err)
	}
	// A frame whose window is larger than the one the stream was charged for.
	_, err = p.DecodeStream(context.Background(), 64<<10, bytes.NewReader(testblob.CompressStream(t, data, 1<<20)), io.Discard)
	if !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		t.Fatalf("a 1 MiB window on a 64 KiB decoder: err %v, want ErrWindowSizeExceeded", err)
	}
	// Cut short.
	s := testblob.CompressStream(t, data, 1<<20)
	_, err = p.DecodeStream(context.Background(), 1<<20, bytes.NewReader(s[:len(s)/2]), io.Discard)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("half a stream: err %v, want io.ErrUnexpectedEOF", err)
	}
	if st := p.Stats(); st.LentBytes != 0 {
		t.Fatalf("%d bytes still lent after every call returned", st.LentBytes)
	}
}

// holdStreamDecoder starts a stream decode that holds its decoder until the
// returned function is called, and waits until the pool has lent it.
func holdStreamDecoder(t *testing.T, p *Pool, window int64) (finish func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	before := p.Stats().LentBytes
	go func() {
		_, err := p.DecodeStream(context.Background(), window, pr, io.Discard)
		done <- err
	}()
	await.True(t, "the decoder to be lent", func() bool { return p.Stats().LentBytes >= before+StreamDecoderCharge(window) })
	return func() error {
		go func() {
			pw.Write(testblob.CompressStream(t, []byte("held"), 1<<10))
			pw.Close()
		}()
		return <-done
	}
}

// TestZstdPoolWaitsForMemory: with the budget spent a request waits rather
// than fails, proceeds when memory comes back, and gives up when its
// context ends, each counted.
func TestZstdPoolWaitsForMemory(t *testing.T) {
	const window = 64 << 10
	p := newTestZstdPool(t, 2*StreamDecoderCharge(window))
	finishA := holdStreamDecoder(t, p, window)
	finishB := holdStreamDecoder(t, p, window)

	// A third waits...
	done := make(chan error, 1)
	data := testblob.Text(100<<10, 1)
	go func() {
		var out bytes.Buffer
		_, err := p.DecodeStream(context.Background(), window, bytes.NewReader(testblob.CompressStream(t, data, window)), &out)
		if err == nil && !bytes.Equal(out.Bytes(), data) {
			err = errors.New("wrong output")
		}
		done <- err
	}()
	await.True(t, "the third request to wait", func() bool { return p.Stats().Waiting == 1 })
	if st := p.Stats(); st.LentBytes+st.IdleBytes > st.Budget {
		t.Fatalf("%d bytes lent and %d idle, over the budget of %d", st.LentBytes, st.IdleBytes, st.Budget)
	}

	// ...a fourth, with a deadline, gives up...
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.DecodeStream(ctx, window, strings.NewReader("unused"), io.Discard); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request whose deadline passes while waiting: err %v, want DeadlineExceeded", err)
	}
	if st := p.Stats(); st.Timeouts != 1 || st.Waiting != 1 {
		t.Fatalf("after the deadline: %d timeouts, %d waiting; want 1 and 1", st.Timeouts, st.Waiting)
	}

	// ...and the third proceeds when one is given back.
	if err := finishA(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting request: %v", err)
	}
	if err := finishB(); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Waits != 2 || st.WaitTime <= 0 || st.Waiting != 0 || st.LentBytes != 0 {
		t.Fatalf("at the end: %+v; want 2 waits with their time, none waiting, nothing lent", st)
	}
	if st.PeakBytes > st.Budget {
		t.Fatalf("peak %d over budget %d", st.PeakBytes, st.Budget)
	}
}

// TestZstdPoolFirstComeFirstServed: a large request at the head of the
// queue is not overtaken by small ones that would fit, so it cannot starve.
func TestZstdPoolFirstComeFirstServed(t *testing.T) {
	const small, large = 64 << 10, 1 << 20
	p := newTestZstdPool(t, StreamDecoderCharge(large))
	finish := holdStreamDecoder(t, p, small)

	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	start := func(name string, window int64, waiting int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bytes.NewReader(testblob.CompressStream(t, []byte(name), int(window)))
			if _, err := p.DecodeStream(context.Background(), window, r, io.Discard); err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
		}()
		await.True(t, name+" to wait", func() bool { return p.Stats().Waiting == waiting })
	}
	start("large", large, 1)
	start("small", small, 2) // would fit beside the held one, but comes second
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(order) != 2 || order[0] != "large" {
		t.Fatalf("served in the order %v; want the large request first", order)
	}
}

// TestZstdPoolReserveForFrameCoders: stream decoders, held for as long as a
// client takes, cannot take the memory frame coders need. Without the
// reserve, uploads that hold stream decoders and wait for encoders for
// their frames could wait on each other for good.
func TestZstdPoolReserveForFrameCoders(t *testing.T) {
	const window = 64 << 10
	long := StreamDecoderCharge(window)
	p := newZstdPool(2*long+encoderCharge, encoderCharge)
	finishA := holdStreamDecoder(t, p, window)
	finishB := holdStreamDecoder(t, p, window)
	done := make(chan error, 1)
	go func() {
		_, err := p.DecodeStream(context.Background(), window, bytes.NewReader(testblob.CompressStream(t, []byte("third"), window)), io.Discard)
		done <- err
	}()
	await.True(t, "a third stream decoder to wait", func() bool { return p.Stats().Waiting == 1 })
	if st := p.Stats(); st.LongBytes != 2*long {
		t.Fatalf("%d bytes held by stream decoders, want %d", st.LongBytes, 2*long)
	}
	// The stream decoder waiting does not hold up an encoder (which, if it
	// did, would wait until the deadline).
	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	if _, err := p.EncodeFrame(ctx, []byte("frame"), nil); err != nil {
		t.Fatalf("an encoder while stream decoders wait: %v", err)
	}
	if err := finishA(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := finishB(); err != nil {
		t.Fatal(err)
	}
}

// TestZstdPoolFrameCodersAlwaysProgress: on a budget smaller than one
// coder, a stream decoder held (let through alone) does not keep out the
// encoder its upload needs for its frames.
func TestZstdPoolFrameCodersAlwaysProgress(t *testing.T) {
	p := mustZstdPool(t, 256<<10)
	finish := holdStreamDecoder(t, p, 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), await.Timeout)
	defer cancel()
	if _, err := p.EncodeFrame(ctx, []byte("frame"), nil); err != nil {
		t.Fatalf("an encoder while a stream decoder over the budget is held: %v", err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
}

// TestZstdPoolDropsIdleCodersForSpace: idle coders stay for reuse but give
// way to a request that needs their memory, and the total never exceeds
// the budget.
func TestZstdPoolDropsIdleCodersForSpace(t *testing.T) {
	p := newTestZstdPool(t, encoderCharge+frameDecoderCharge)
	ctx := context.Background()
	data := testblob.Text(10000, 9)
	fb, err := p.EncodeFrame(ctx, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := fb.Bytes()
	if _, err := p.DecodeFrame(ctx, frame, make([]byte, 0, len(data))); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.IdleBytes != encoderCharge+frameDecoderCharge {
		t.Fatalf("idle %d bytes, want both coders kept", st.IdleBytes)
	}
	if _, err := p.DecodeStream(ctx, 64<<10, bytes.NewReader(testblob.CompressStream(t, data, 64<<10)), io.Discard); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	if st.Dropped == 0 || st.IdleBytes > st.Budget || st.PeakBytes > st.Budget {
		t.Fatalf("after a stream decode on a full budget: %+v; want idle coders dropped and the budget kept", st)
	}
}

// TestZstdPoolOversizeAlone: a request for more than the whole budget runs
// when nothing else is lent, instead of waiting forever.
func TestZstdPoolOversizeAlone(t *testing.T) {
	p := newTestZstdPool(t, 1<<20)
	data := testblob.Text(5<<20, 4)
	var out bytes.Buffer
	if _, err := p.DecodeStream(context.Background(), 4<<20, bytes.NewReader(testblob.CompressStream(t, data, 4<<20)), &out); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("err %v", err)
	}
}

// TestZstdPoolDoubleReleasePanics: giving a coder back twice would inflate
// the free budget (bb-storage PR 330's bug); the pool refuses.
func TestZstdPoolDoubleReleasePanics(t *testing.T) {
	p := newTestZstdPool(t, 4<<20)
	c, err := p.acquire(context.Background(), frameEncoder, encoderCharge)
	if err != nil {
		t.Fatal(err)
	}
	p.release(c)
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "released twice") {
			t.Fatalf("second release: recovered %v, want a panic naming the double release", r)
		}
		if st := p.Stats(); st.LentBytes != 0 || st.IdleBytes != encoderCharge {
			t.Fatalf("the failed release changed the accounting: %+v", st)
		}
	}()
	p.release(c)
}

// TestZstdChargesCoverCoderMemory measures what each kind of coder keeps on
// the heap after its heaviest use and fails if its charge is less: the
// budget is only as good as these figures, and a new version of the
// library could change them.
func TestZstdChargesCoverCoderMemory(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t) // heap figures mean as little as allocation counts there
	ctx := context.Background()
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	frameData := testblob.Text(FrameSize, 1)
	frame := testblob.CompressStream(t, frameData, FrameSize)
	out := make([]byte, 0, FrameSize)
	streams := map[int64][]byte{}
	for _, w := range []int64{64 << 10, 1 << 20, MaxUploadWindow} {
		streams[w] = testblob.CompressStream(t, testblob.Text(int(2*w), 2), int(w))
	}
	measure := func(name string, charge int64, use func(p *Pool) error) {
		t.Helper()
		before := heap()
		p := newTestZstdPool(t, 1<<30)
		if err := use(p); err != nil {
			t.Fatal(err)
		}
		held := heap() - before
		t.Logf("%s: %d KiB held, %d KiB charged", name, held>>10, charge>>10)
		if held > charge {
			t.Errorf("%s holds %d bytes, more than its charge of %d", name, held, charge)
		}
		runtime.KeepAlive(p)
	}
	measure("encoder", encoderCharge, func(p *Pool) error {
		frame, err := p.EncodeFrame(ctx, frameData, nil)
		frame.Free()
		return err
	})
	measure("frame decoder", frameDecoderCharge, func(p *Pool) error {
		_, err := p.DecodeFrame(ctx, frame, out[:0])
		return err
	})
	for w, s := range streams {
		measure(fmt.Sprintf("stream decoder, window %d KiB", w>>10), StreamDecoderCharge(w), func(p *Pool) error {
			_, err := p.DecodeStream(ctx, w, bytes.NewReader(s), io.Discard)
			return err
		})
	}
}
