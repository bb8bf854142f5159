package membuf

import (
	"bytes"
	"strconv"
	"sync"
)

// poisonByte fills the capacity of a buffer returned to a pool in debug
// mode; a different byte found at the next Get means someone wrote to the
// buffer after Put.
const poisonByte = 0xdb

// poisonBlock is a run of poisonByte that poison copies from and
// checkPoison compares against.
var poisonBlock = bytes.Repeat([]byte{poisonByte}, 4096)

// poolDebug remembers where each retained buffer was Put, keyed by the
// address of its first byte. Entries are removed when the buffer is taken
// again, released or dropped, so the map holds only retained buffers.
type poolDebug struct {
	mu     sync.Mutex
	stacks map[*byte]*stack
}

func newPoolDebug() *poolDebug {
	return &poolDebug{stacks: make(map[*byte]*stack)}
}

func key(b *[]byte) *byte { return &(*b)[:1][0] }

func (d *poolDebug) record(b *[]byte, st *stack) {
	d.mu.Lock()
	d.stacks[key(b)] = st
	d.mu.Unlock()
}

func (d *poolDebug) forget(b *[]byte) *stack {
	d.mu.Lock()
	st := d.stacks[key(b)]
	delete(d.stacks, key(b))
	d.mu.Unlock()
	return st
}

// poison fills the whole capacity of b with poisonByte and returns the
// caller's stack (the Put). It runs before b is filed, outside any lock.
func (p *Pool) poison(b *[]byte) *stack {
	s := (*b)[:cap(*b)]
	for len(s) > 0 {
		s = s[copy(s, poisonBlock):]
	}
	return recordStack(2) // from Put down
}

// checkPoison verifies that a reused buffer still holds the poison over its
// whole capacity and reports a use after free if not. It carries on either
// way: the caller gets the buffer, cleared as usual.
func (p *Pool) checkPoison(b *[]byte) {
	var st *stack
	if p.dbg != nil {
		st = p.dbg.forget(b)
	}
	s := (*b)[:cap(*b)]
	for off := 0; off < len(s); off += len(poisonBlock) {
		chunk := s[off:min(off+len(poisonBlock), len(s))]
		if bytes.Equal(chunk, poisonBlock[:len(chunk)]) {
			continue
		}
		i := 0
		for chunk[i] == poisonByte {
			i++
		}
		class := "oversize class"
		if c := cap(s); c <= p.classes.maxSize {
			class = "class " + strconv.Itoa(p.classes.size(p.classes.putIndex(c)))
		}
		report(Report{
			Kind: ReportUseAfterFree,
			Message: "buffer of capacity " + strconv.Itoa(cap(s)) + " in " + class +
				" was written after Put: first modified byte at offset " + strconv.Itoa(off+i),
			Freed: st.String(),
		})
		return
	}
}
