package membuf

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func sliceString(s Slice) string {
	b := make([]byte, s.Len())
	s.CopyTo(b)
	return string(b)
}

func TestWriterPacksSmallWrites(t *testing.T) {
	pool := newTrackingPool(t)
	w := NewWriter(pool, 1024)
	var want bytes.Buffer
	for i := range 1000 {
		p := []byte{byte(i), byte(i >> 8), 'x'}
		w.Write(p)
		w.WriteString("yz")
		w.WriteByte('!')
		want.Write(p)
		want.WriteString("yz!")
	}
	if w.Len() != want.Len() {
		t.Fatalf("Len %d; want %d", w.Len(), want.Len())
	}
	s := w.Slice()
	// 6000 bytes in chunks of at least 1024 bytes: at most 6 buffers, not
	// one per write.
	if len(s) > 6 || pool.gets > 6 {
		t.Fatalf("3000 small writes made %d buffers (%d Gets); want at most 6", len(s), pool.gets)
	}
	if got := sliceString(s); got != want.String() {
		t.Fatal("contents differ")
	}
	if w.Len() != 0 || len(w.Slice()) != 0 {
		t.Fatal("Slice did not reset the Writer")
	}
	s.Free()
	pool.checkAllReturned()
}

func TestWriterSmallWritesDoNotAllocate(t *testing.T) {
	skipUnderRace(t, "the race detector makes sync.Pool drop headers, which allocates")
	w := NewWriter(&lifoTestPool{}, 0)
	p := []byte("0123456789")
	w.Write(p)
	n := testing.AllocsPerRun(1000, func() {
		w.Write(p)
		w.WriteString("abc")
		w.WriteByte('x')
	})
	if n != 0 {
		t.Fatalf("%v allocations per small write; want 0", n)
	}
	w.Free()
}

func TestWriterLargeWrite(t *testing.T) {
	pool := newTrackingPool(t)
	w := NewWriter(pool, 100)
	big := bytes.Repeat([]byte("abcdefghij"), 95)
	w.WriteString("<")
	w.Write(big)
	s := w.Slice()
	if sliceString(s) != "<"+string(big) {
		t.Fatal("contents differ")
	}
	s.Free()
	pool.checkAllReturned()
}

func TestWriterReadFrom(t *testing.T) {
	pool := newTrackingPool(t)
	want := strings.Repeat("membuf ", 5000)
	w := NewWriter(pool, 4096)
	// OneByteReader and DataErrReader exercise short reads and data with EOF.
	n, err := w.ReadFrom(iotest.DataErrReader(iotest.HalfReader(strings.NewReader(want))))
	if err != nil || n != int64(len(want)) {
		t.Fatalf("ReadFrom: %d, %v", n, err)
	}
	s := w.Slice()
	if sliceString(s) != want {
		t.Fatal("contents differ")
	}
	if len(s) > (len(want)+4095)/4096 {
		t.Fatalf("%d buffers; want full chunks", len(s))
	}
	s.Free()
	pool.checkAllReturned()
}

func TestWriterReadFromError(t *testing.T) {
	pool := newTrackingPool(t)
	w := NewWriter(pool, 16)
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("some bytes before"), iotest.ErrReader(boom))
	n, err := w.ReadFrom(r)
	if err != boom || n != 17 || w.Len() != 17 {
		t.Fatalf("ReadFrom: %d, %v, Len %d", n, err, w.Len())
	}
	w.Free()
	pool.checkAllReturned()
	if w.Len() != 0 {
		t.Fatal("Free did not reset")
	}
}

func TestWriterNilPool(t *testing.T) {
	w := NewWriter(nil, 4)
	w.WriteString("hello")
	s := w.Slice()
	if sliceString(s) != "hello" || len(s) != 2 {
		t.Fatalf("%q in %d buffers", sliceString(s), len(s))
	}
	s.Free()
}

func TestWriterEmptySlice(t *testing.T) {
	pool := newTrackingPool(t)
	w := NewWriter(pool, 0)
	w.Write(nil)
	w.ReadFrom(strings.NewReader(""))
	if s := w.Slice(); len(s) != 0 {
		t.Fatalf("empty writer gave %d buffers", len(s))
	}
	pool.checkAllReturned()
}

func TestWriterReadFromInvalidReader(t *testing.T) {
	pool := newTrackingPool(t)
	w := NewWriter(pool, 16)
	if _, err := w.ReadFrom(badReader{}); err == nil || !strings.Contains(err.Error(), "invalid byte count") {
		t.Fatalf("err %v", err)
	}
	w.Free()
	pool.checkAllReturned()
}
