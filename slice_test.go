package membuf

import (
	"bytes"
	"net"
	"testing"
)

// sliceOf returns a Slice of pooled buffers holding parts, in order.
func sliceOf(pool BufferPool, parts ...string) Slice {
	s := make(Slice, 0, len(parts))
	for _, p := range parts {
		b := Alloc(pool, len(p))
		copy(b.Bytes(), p)
		s = append(s, b)
	}
	return s
}

func TestSliceLenCopyTo(t *testing.T) {
	pool := newTrackingPool(t)
	s := sliceOf(pool, "hello", "", " ", "world")
	if s.Len() != 11 {
		t.Fatalf("Len %d; want 11", s.Len())
	}
	dst := make([]byte, 20)
	if n := s.CopyTo(dst); n != 11 || string(dst[:n]) != "hello world" {
		t.Fatalf("CopyTo: %d %q", n, dst[:n])
	}
	short := make([]byte, 7)
	if n := s.CopyTo(short); n != 7 || string(short) != "hello w" {
		t.Fatalf("CopyTo short: %d %q", n, short)
	}
	if n := s.CopyTo(nil); n != 0 {
		t.Fatalf("CopyTo(nil) = %d", n)
	}
	s.Free()
	pool.checkAllReturned()
	var empty Slice
	if empty.Len() != 0 || empty.CopyTo(dst) != 0 {
		t.Fatal("empty Slice")
	}
}

func TestSliceRefFree(t *testing.T) {
	pool := newTrackingPool(t)
	s := sliceOf(pool, "ab", "cd")
	s.Ref()
	s.Free()
	if pool.numOutstanding() != 2 {
		t.Fatal("returned while referenced")
	}
	s.Free()
	pool.checkAllReturned()
	mustPanicWith(t, s.Free, "double free")
}

func TestMaterialize(t *testing.T) {
	pool := newTrackingPool(t)

	// One buffer: no copy, one more reference.
	one := sliceOf(pool, "only")
	gets := pool.gets
	m := one.Materialize(pool)
	if pool.gets != gets || &m.Bytes()[0] != &one[0].Bytes()[0] {
		t.Fatal("Materialize of one buffer copied")
	}
	one.Free()
	if string(m.Bytes()) != "only" {
		t.Fatal("materialized buffer freed with the slice")
	}
	m.Free()

	// Several: one pooled buffer with the bytes.
	s := sliceOf(pool, "ab", "", "cde")
	m = s.Materialize(pool)
	s.Free()
	if string(m.Bytes()) != "abcde" {
		t.Fatalf("Materialize %q", m.Bytes())
	}
	m.Free()

	if m := (Slice{}).Materialize(pool); !m.IsZero() {
		t.Fatal("Materialize of empty Slice is not zero")
	}
	if m := (Slice{Wrap(nil), Wrap(nil)}).Materialize(pool); !m.IsZero() {
		t.Fatal("Materialize of empty buffers is not zero")
	}
	if m := sliceOf(nil, "x", "y").Materialize(nil); string(m.Bytes()) != "xy" {
		t.Fatal("Materialize with nil pool")
	}
	pool.checkAllReturned()
}

func TestAppendBuffers(t *testing.T) {
	pool := newTrackingPool(t)
	s := sliceOf(pool, "ab", "", "cde")
	nb := s.Buffers()
	if len(nb) != 2 {
		t.Fatalf("Buffers has %d entries; want 2 (empty buffers left out)", len(nb))
	}
	var w bytes.Buffer
	if _, err := nb.WriteTo(&w); err != nil || w.String() != "abcde" {
		t.Fatalf("WriteTo: %v %q", err, w.String())
	}
	prefix := net.Buffers{[]byte("<")}
	if nb := s.AppendBuffers(prefix); len(nb) != 3 || string(nb[0]) != "<" {
		t.Fatal("AppendBuffers did not append")
	}
	s.Free()
	pool.checkAllReturned()
}
