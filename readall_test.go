package membuf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// onlyReader hides everything but Read, so the size is unknown.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func checkReadAll(t *testing.T, pool *trackingPool, s Slice, err error, want []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(want) {
		t.Fatalf("read %d bytes; want %d", s.Len(), len(want))
	}
	if !bytes.Equal([]byte(sliceString(s)), want) {
		t.Fatal("contents differ")
	}
	s.Free()
	pool.checkAllReturned()
}

func TestReadAllKnownSize(t *testing.T) {
	for _, n := range []int{0, 1, 512, maxReadAllChunk - 1, maxReadAllChunk, 3*maxReadAllChunk + 17} {
		want := randomBytes(n)
		pool := newTrackingPool(t)
		s, err := ReadAll(bytes.NewReader(want), pool, 0)
		if n > 0 && cap(s) < len(s) {
			t.Fatal("impossible")
		}
		if n > 0 && cap(s) > n/maxReadAllChunk+2 {
			t.Errorf("n=%d: reserved capacity %d; want at most %d", n, cap(s), n/maxReadAllChunk+2)
		}
		if n > 0 && len(s) != (n+maxReadAllChunk-1)/maxReadAllChunk {
			t.Errorf("n=%d: %d buffers; want %d", n, len(s), (n+maxReadAllChunk-1)/maxReadAllChunk)
		}
		checkReadAll(t, pool, s, err, want)
	}
}

func TestReadAllKnownSizeSources(t *testing.T) {
	want := randomBytes(100_000)
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	sources := []struct {
		name string
		r    io.Reader
		size int
		want []byte
	}{
		{"bytes.Reader", bytes.NewReader(want), len(want), want},
		{"bytes.Buffer", bytes.NewBuffer(want), len(want), want},
		{"strings.Reader", strings.NewReader(string(want)), len(want), want},
		{"os.File at offset", f, len(want) - 1000, want[1000:]},
		{"SectionReader", io.NewSectionReader(bytes.NewReader(want), 10, 5000), 5000, want[10:5010]},
		{"LimitedReader", io.LimitReader(bytes.NewReader(want), 300), 300, want[:300]},
		{"LimitedReader over more", io.LimitReader(bytes.NewReader(want[:20]), 1<<62), 20, want[:20]},
		{"membuf.Reader", NewReader(Slice{Wrap(want[:7]), Wrap(want[7:9])}), 9, want[:9]},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			if got := knownSize(src.r); got != src.size {
				t.Fatalf("knownSize %d; want %d", got, src.size)
			}
			pool := newTrackingPool(t)
			s, err := ReadAll(src.r, pool, 0)
			checkReadAll(t, pool, s, err, src.want)
		})
	}
	if knownSize(onlyReader{bytes.NewReader(want)}) != 0 {
		t.Fatal("size of a plain reader is known")
	}
}

func TestReadAllUnknownSize(t *testing.T) {
	for _, n := range []int{0, 1, DefaultChunkSize, 5*maxReadAllChunk + 3} {
		want := randomBytes(n)
		pool := newTrackingPool(t)
		s, err := ReadAll(onlyReader{iotest.HalfReader(bytes.NewReader(want))}, pool, 0)
		checkReadAll(t, pool, s, err, want)
	}
}

func TestReadAllWrongHint(t *testing.T) {
	want := randomBytes(200_000)
	for _, hint := range []int{1, 1000, 199_999, 200_000, 200_001, 10 << 20} {
		pool := newTrackingPool(t)
		s, err := ReadAll(onlyReader{bytes.NewReader(want)}, pool, hint)
		checkReadAll(t, pool, s, err, want)
	}
	// A hint overrides what the reader says.
	pool := newTrackingPool(t)
	s, err := ReadAll(bytes.NewReader(want), pool, 10)
	checkReadAll(t, pool, s, err, want)
}

func TestReadAllErrorFreesEverything(t *testing.T) {
	boom := errors.New("boom")
	for _, sized := range []bool{false, true} {
		pool := newTrackingPool(t)
		r := io.MultiReader(bytes.NewReader(randomBytes(3*maxReadAllChunk)), iotest.ErrReader(boom))
		hint := 0
		if sized {
			hint = 4 * maxReadAllChunk
		}
		s, err := ReadAll(r, pool, hint)
		if err != boom || s != nil {
			t.Fatalf("ReadAll: %d buffers, %v; want nil, boom", len(s), err)
		}
		if pool.gets < 3 {
			t.Fatalf("only %d Gets: the error came too early to test anything", pool.gets)
		}
		pool.checkAllReturned()
	}
	// Data returned together with an error is freed too.
	pool := newTrackingPool(t)
	_, err := ReadAll(iotest.TimeoutReader(iotest.OneByteReader(strings.NewReader("ab"))), pool, 0)
	if err != iotest.ErrTimeout {
		t.Fatalf("err %v", err)
	}
	pool.checkAllReturned()
}

type badReader struct{}

func (badReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

func TestReadAllInvalidReader(t *testing.T) {
	pool := newTrackingPool(t)
	if _, err := ReadAll(badReader{}, pool, 0); err == nil || !strings.Contains(err.Error(), "invalid byte count") {
		t.Fatalf("err %v", err)
	}
	pool.checkAllReturned()
}

func TestReadAllKnownSizeAllocations(t *testing.T) {
	skipUnderRace(t, "the race detector makes sync.Pool drop headers, which allocates")
	SetDebugEnv(t, false) // debug mode records stacks: it allocates by design
	// Besides the pooled buffers, a known-size ReadAll allocates the same
	// small number of objects whatever the size.
	pool := &lifoTestPool{}
	allocs := func(n int) float64 {
		data := randomBytes(n)
		r := bytes.NewReader(data)
		return testing.AllocsPerRun(20, func() {
			r.Reset(data)
			s, err := ReadAll(r, pool, 0)
			if err != nil {
				t.Fatal(err)
			}
			s.Free()
		})
	}
	small, large := allocs(1<<20), allocs(16<<20)
	t.Logf("allocations: %v for 1 MiB, %v for 16 MiB", small, large)
	if small > 2 || large != small {
		t.Fatalf("allocations: %v for 1 MiB, %v for 16 MiB; want the same, at most 2", small, large)
	}
}
