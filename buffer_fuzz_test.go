package membuf

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// FuzzBufferOps drives random sequences of buffer operations against a
// model: for each reference the fuzzer holds, the bytes it must see and the
// pooled allocation it keeps alive. After every operation it checks that
// every live reference sees its bytes, and that the pool holds out exactly
// the allocations some live reference keeps alive: so a buffer that came
// back early, late, twice or never fails. Misuse of stale handles must panic
// and leave everything else intact. The seed corpus in
// testdata/fuzz/FuzzBufferOps runs with every go test.
func FuzzBufferOps(f *testing.F) {
	f.Add([]byte{0, 40, 2, 0, 10, 3, 0, 1, 5, 5, 0, 5, 0})
	f.Add([]byte{0, 200, 4, 0, 2, 1, 100, 7, 3, 8, 5, 0, 5, 0, 9, 0})
	f.Add([]byte{1, 30, 0, 60, 0, 90, 7, 0, 4, 10, 1, 3, 11, 2})
	f.Add([]byte{0, 255, 2, 0, 128, 2, 0, 64, 3, 1, 5, 30, 8, 0, 6, 0, 7, 1, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m := newBufferModel(t)
		for len(ops) > 0 {
			ops = m.step(ops)
			m.check()
		}
		m.freeAll()
	})
}

// ref is one reference the model holds.
type ref struct {
	b    Buffer
	want []byte
	// alloc is the pooled allocation the reference keeps alive (nil for
	// wrapped memory).
	alloc *[]byte
}

type bufferModel struct {
	t    *testing.T
	pool *trackingPool
	refs []ref
	// stale are handles whose last reference has been freed.
	stale []Buffer
	seed  byte
}

func newBufferModel(t *testing.T) *bufferModel {
	m := &bufferModel{t: t}
	m.pool = newTrackingPool(t)
	return m
}

// take consumes one byte of ops (0 when there are none).
func take(ops *[]byte) int {
	if len(*ops) == 0 {
		return 0
	}
	v := (*ops)[0]
	*ops = (*ops)[1:]
	return int(v)
}

func (m *bufferModel) pick(ops *[]byte) int {
	return take(ops) % len(m.refs)
}

func (m *bufferModel) alloc(n int) (Buffer, *[]byte) {
	before := m.pool.gets
	b := Alloc(m.pool, n)
	var p *[]byte
	if m.pool.gets != before {
		p = b.h.root.orig // white-box: which allocation backs the buffer
	}
	m.seed += 7
	fill(b.Bytes(), m.seed)
	return b, p
}

// sharers returns how many model references share r's handle (Ref'd copies).
func (m *bufferModel) sharers(b Buffer) int {
	n := 0
	for _, r := range m.refs {
		if r.b == b {
			n++
		}
	}
	return n
}

// remove drops reference i from the model (after it was freed).
func (m *bufferModel) remove(i int) {
	b := m.refs[i].b
	m.refs = append(m.refs[:i], m.refs[i+1:]...)
	if m.sharers(b) == 0 && !b.IsZero() {
		m.stale = append(m.stale, b)
		if len(m.stale) > 8 {
			m.stale = m.stale[1:]
		}
	}
}

func (m *bufferModel) step(ops []byte) []byte {
	op := take(&ops) % 12
	if len(m.refs) == 0 && op != 1 {
		op = 0
	}
	switch op {
	case 0: // Alloc
		b, p := m.alloc(take(&ops) * 3)
		m.refs = append(m.refs, ref{b, bytes.Clone(b.Bytes()), p})
	case 1: // Wrap
		m.seed += 3
		data := fill(make([]byte, take(&ops)), m.seed)
		m.refs = append(m.refs, ref{Wrap(data), bytes.Clone(data), nil})
	case 2: // Split
		i := m.pick(&ops)
		r := m.refs[i]
		n := take(&ops) % (len(r.want) + 1)
		if m.sharers(r.b) > 1 {
			mustPanicWith(m.t, func() { r.b.Split(n) }, "Split of a shared buffer")
			break
		}
		right := r.b.Split(n)
		m.refs[i].want = r.want[:n]
		m.refs = append(m.refs, ref{right, r.want[n:], r.alloc})
	case 3: // Slice
		r := m.refs[m.pick(&ops)]
		a, b := take(&ops)%(len(r.want)+1), take(&ops)%(len(r.want)+1)
		a, b = min(a, b), max(a, b)
		m.refs = append(m.refs, ref{r.b.Slice(a, b), r.want[a:b], r.alloc})
	case 4: // Ref
		r := m.refs[m.pick(&ops)]
		r.b.Ref()
		m.refs = append(m.refs, r)
	case 5, 6: // Free
		i := m.pick(&ops)
		m.refs[i].b.Free()
		m.remove(i)
	case 7: // read through a Reader of some references
		m.readSome(&ops)
	case 8: // Materialize some references
		k := 1 + take(&ops)%3
		var s Slice
		var want []byte
		for range k {
			if len(m.refs) == 0 {
				break
			}
			r := m.refs[m.pick(&ops)]
			r.b.Ref() // the Slice owns its own references
			s = append(s, r.b)
			want = append(want, r.want...)
		}
		before := m.pool.gets
		mb := s.Materialize(m.pool)
		var p *[]byte
		switch {
		case len(s) == 1:
			p = m.allocOf(s[0])
		case m.pool.gets != before:
			p = mb.h.root.orig
		}
		s.Free()
		if !mb.IsZero() {
			m.refs = append(m.refs, ref{mb, want, p})
		}
	case 9: // misuse of a stale handle
		if len(m.stale) == 0 {
			break
		}
		b := m.stale[take(&ops)%len(m.stale)]
		switch take(&ops) % 4 {
		case 0:
			mustPanicWith(m.t, b.Free, "membuf: double free of buffer")
		case 1:
			mustPanicWith(m.t, b.Ref, "membuf: Ref of freed buffer")
		case 2:
			mustPanicWith(m.t, func() { b.Bytes() }, "membuf: use of freed buffer")
		case 3:
			mustPanicWith(m.t, func() { b.Slice(0, 0) }, "membuf: use of freed buffer")
		}
	case 10: // Writer: write some references' bytes, take the Slice
		w := NewWriter(m.pool, 1+take(&ops)*5)
		for range 1 + take(&ops)%4 {
			r := m.refs[m.pick(&ops)]
			if take(&ops)%2 == 0 {
				w.Write(r.b.Bytes())
			} else {
				w.ReadFrom(bytes.NewReader(r.b.Bytes()))
			}
		}
		s := w.Slice()
		for _, b := range s {
			m.refs = append(m.refs, ref{b, bytes.Clone(b.Bytes()), b.h.root.orig})
		}
	case 11: // ReadAll of some reference's bytes, with a hint
		r := m.refs[m.pick(&ops)]
		hint := take(&ops) * 4
		want := bytes.Clone(r.want)
		s, err := ReadAll(onlyReader{bytes.NewReader(r.b.Bytes())}, m.pool, hint)
		if err != nil {
			m.t.Fatal(err)
		}
		if got := []byte(sliceString(s)); !bytes.Equal(got, want) {
			m.t.Fatalf("ReadAll read %q; want %q", got, want)
		}
		for _, b := range s {
			m.refs = append(m.refs, ref{b, bytes.Clone(b.Bytes()), b.h.root.orig})
		}
	}
	return ops
}

// allocOf returns the allocation the model says b keeps alive.
func (m *bufferModel) allocOf(b Buffer) *[]byte {
	for _, r := range m.refs {
		if r.b == b {
			return r.alloc
		}
	}
	return nil
}

// readSome hands some references to a Reader and reads them back with a mix
// of Read, ReadByte and WriteTo, possibly closing early.
func (m *bufferModel) readSome(ops *[]byte) {
	k := 1 + take(ops)%4
	var s Slice
	var allocs []*[]byte
	var want []byte
	for range k {
		if len(m.refs) == 0 {
			break
		}
		i := m.pick(ops)
		s = append(s, m.refs[i].b)
		allocs = append(allocs, m.refs[i].alloc)
		want = append(want, m.refs[i].want...)
		m.refs = append(m.refs[:i], m.refs[i+1:]...) // owned by the Reader now
	}
	r := NewReader(s)
	var got []byte
	for len(got) < len(want) {
		if r.Len() != len(want)-len(got) {
			m.t.Fatalf("Reader.Len %d; want %d", r.Len(), len(want)-len(got))
		}
		switch take(ops) % 4 {
		case 0:
			p := make([]byte, 1+take(ops)%50)
			n, err := r.Read(p)
			if err != nil {
				m.t.Fatalf("Read: %v", err)
			}
			got = append(got, p[:n]...)
		case 1:
			c, err := r.ReadByte()
			if err != nil {
				m.t.Fatalf("ReadByte: %v", err)
			}
			got = append(got, c)
		case 2:
			var w bytes.Buffer
			if _, err := r.WriteTo(&w); err != nil {
				m.t.Fatal(err)
			}
			got = append(got, w.Bytes()...)
		case 3:
			r.Close()
			want = want[:len(got)]
		}
		// Buffers read so far must be back in the pool, unless the model
		// still holds them; the rest must not.
		m.check(allocs[len(s)-len(r.s):]...)
	}
	if !bytes.Equal(got, want) {
		m.t.Fatalf("Reader read %q; want %q", got, want)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		m.t.Fatalf("Read at end: %d, %v", n, err)
	}
	// The Reader freed what it consumed: the handles it took are stale
	// unless the model still holds a reference to them.
	for _, b := range s {
		if m.sharers(b) == 0 && !b.IsZero() {
			m.stale = append(m.stale, b)
		}
	}
	if len(m.stale) > 8 {
		m.stale = m.stale[len(m.stale)-8:]
	}
}

// check compares everything with the model.
// extra are allocations kept alive by references outside the model.
func (m *bufferModel) check(extra ...*[]byte) {
	m.t.Helper()
	alive := map[*[]byte]bool{}
	for _, p := range extra {
		if p != nil {
			alive[p] = true
		}
	}
	for _, r := range m.refs {
		if got := r.b.Bytes(); !bytes.Equal(got, r.want) {
			m.t.Fatalf("%v: bytes %q; want %q", r.b, got, r.want)
		}
		if r.alloc != nil {
			alive[r.alloc] = true
		}
	}
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	for p := range alive {
		if !m.pool.outstanding[p] {
			m.t.Fatalf("allocation %p returned to the pool while a view is alive", p)
		}
	}
	for p := range m.pool.outstanding {
		if !alive[p] {
			m.t.Fatalf("allocation %p still out of the pool with no live view", p)
		}
	}
}

func (m *bufferModel) freeAll() {
	for len(m.refs) > 0 {
		m.refs[0].b.Free()
		m.remove(0)
	}
	m.check()
	m.pool.checkAllReturned()
}

// String is for debugging failed runs.
func (m *bufferModel) String() string {
	var b strings.Builder
	for _, r := range m.refs {
		fmt.Fprintf(&b, "%v %q\n", r.b, r.want)
	}
	return b.String()
}
