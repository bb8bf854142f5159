package membuf

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReaderRead(t *testing.T) {
	pool := newTrackingPool(t)
	r := NewReader(sliceOf(pool, "hel", "", "lo w", "orld"))
	if r.Len() != 11 {
		t.Fatalf("Len %d", r.Len())
	}
	p := make([]byte, 4)
	var got []byte
	for {
		n, err := r.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			if n != 0 {
				t.Fatal("EOF with data")
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != "hello world" || r.Len() != 0 {
		t.Fatalf("read %q, Len %d", got, r.Len())
	}
	pool.checkAllReturned()
}

func TestReaderFreesAsItReads(t *testing.T) {
	pool := newTrackingPool(t)
	r := NewReader(sliceOf(pool, "abc", "def"))
	p := make([]byte, 3)
	if _, err := io.ReadFull(r, p); err != nil {
		t.Fatal(err)
	}
	if pool.numOutstanding() != 1 {
		t.Fatalf("%d buffers outstanding after reading the first; want 1", pool.numOutstanding())
	}
	r.Close()
	pool.checkAllReturned()
	if n, err := r.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("Read after Close: %d, %v", n, err)
	}
}

func TestReaderIOTest(t *testing.T) {
	pool := newTrackingPool(t)
	want := bytes.Repeat([]byte("0123456789"), 30)
	parts := []string{string(want[:1]), string(want[1:100]), "", string(want[100:299]), string(want[299:])}
	if err := iotest.TestReader(NewReader(sliceOf(pool, parts...)), want); err != nil {
		t.Fatal(err)
	}
	pool.checkAllReturned()
}

func TestReaderReadByte(t *testing.T) {
	pool := newTrackingPool(t)
	r := NewReader(sliceOf(pool, "", "a", "", "", "bc", ""))
	var got []byte
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		got = append(got, c)
	}
	if string(got) != "abc" {
		t.Fatalf("ReadByte read %q", got)
	}
	pool.checkAllReturned() // trailing empty buffers freed too
}

func TestReaderWriteTo(t *testing.T) {
	pool := newTrackingPool(t)
	r := NewReader(sliceOf(pool, "hello", "", " ", "world"))
	// Read part of the first buffer, then WriteTo the rest.
	p := make([]byte, 2)
	r.Read(p)
	var writes [][]byte
	w := writerFunc(func(p []byte) (int, error) {
		writes = append(writes, bytes.Clone(p)) // an io.Writer must not keep p
		if pool.numOutstanding() == 0 {
			t.Error("buffer freed before its Write")
		}
		return len(p), nil
	})
	n, err := r.WriteTo(w)
	if err != nil || n != 9 {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	if len(writes) != 3 || string(writes[0]) != "llo" || string(writes[2]) != "world" {
		t.Fatalf("writes %q; want one per non-empty buffer", writes)
	}
	if r.Len() != 0 {
		t.Fatal("Len after WriteTo")
	}
	pool.checkAllReturned()
}

func TestReaderWriteToError(t *testing.T) {
	pool := newTrackingPool(t)
	r := NewReader(sliceOf(pool, "abc", "def"))
	boom := errors.New("boom")
	w := writerFunc(func(p []byte) (int, error) { return 1, boom })
	n, err := r.WriteTo(w)
	if n != 1 || err != boom {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	if r.Len() != 5 {
		t.Fatalf("Len %d after partial write; want 5", r.Len())
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "bcdef" {
		t.Fatalf("rest %q", rest)
	}
	pool.checkAllReturned()

	r = NewReader(sliceOf(pool, "abc"))
	short := writerFunc(func(p []byte) (int, error) { return 1, nil })
	if _, err := r.WriteTo(short); err != io.ErrShortWrite {
		t.Fatalf("short write: %v", err)
	}
	r.Close()
	pool.checkAllReturned()
}

func TestReaderReset(t *testing.T) {
	pool := newTrackingPool(t)
	var r Reader
	if _, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Fatal("zero Reader is not empty")
	}
	r.Reset(sliceOf(pool, "abc"))
	r.ReadByte()
	r.Reset(sliceOf(pool, "xyz"))
	if pool.numOutstanding() != 1 {
		t.Fatal("Reset did not free the unread buffers")
	}
	got, _ := io.ReadAll(&r)
	if string(got) != "xyz" {
		t.Fatalf("after Reset read %q", got)
	}
	pool.checkAllReturned()
}

func TestReaderWriteToInvalidWriter(t *testing.T) {
	pool := newTrackingPool(t)
	r := NewReader(sliceOf(pool, "abc"))
	bad := writerFunc(func(p []byte) (int, error) { return len(p) + 1, nil })
	if _, err := r.WriteTo(bad); err == nil || !strings.Contains(err.Error(), "invalid byte count") {
		t.Fatalf("err %v", err)
	}
	r.Close()
	pool.checkAllReturned()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
