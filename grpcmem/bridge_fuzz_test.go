package grpcmem

import (
	"bytes"
	"testing"

	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
)

// A bridgeRef is one reference held in FuzzBridge: to a membuf or a grpc-go
// buffer, with the bytes it must show. Entries that stand for the same
// reference-counted handle (made by Ref) share a group, so that Split, which
// needs the only reference, is applied only to a handle nobody shares.
type bridgeRef struct {
	m      membuf.Buffer
	g      mem.Buffer // nil for a membuf entry
	want   []byte
	group  int
	pooled bool // views the pooled memory, rather than a copy
}

func (r bridgeRef) bytes() []byte {
	if r.g != nil {
		return r.g.ReadOnlyData()
	}
	return r.m.Bytes()
}

// debugFuzz logs each operation of FuzzBridge, to read a failure.
const debugFuzz = false

// FuzzBridge drives random sequences of conversions both ways, Ref, Free,
// Slice and Split on either side against a model of the bytes. It checks
// that every view shows its bytes, that the pooled memory stays out while
// any view of it is alive, and that it goes back exactly once in the end.
func FuzzBridge(f *testing.F) {
	f.Add(uint16(4096), false, []byte{0, 1, 0, 1, 6})
	f.Add(uint16(4096), true, []byte{1, 2, 0, 4, 0x35, 6, 0, 3, 5, 0x90, 1, 6})
	f.Add(uint16(3000), false, []byte{4, 0x10, 0, 6, 5, 0x80, 0, 1, 2, 3, 6, 0x21, 6})
	f.Add(uint16(1500), true, []byte{5, 0x40, 1, 0, 2, 0x11, 4, 0x72, 0x13, 6, 0x22, 3, 6})
	f.Add(uint16(100), false, []byte{0, 1, 0, 6})
	f.Fuzz(func(t *testing.T, size uint16, grpcFirst bool, ops []byte) {
		n := int(size) % 8192
		pool := newCountingPool(t, 0)
		raw := pool.Get(n)
		fill(*raw, byte(n))
		first := bridgeRef{want: bytes.Clone(*raw), pooled: true}
		if grpcFirst && mem.IsBelowBufferPoolingThreshold(n) {
			// grpc-go keeps no reference to 1 KiB or less: such memory is
			// never pooled.
			first.g = mem.SliceBuffer(bytes.Clone(*raw))
			first.pooled = false
			pool.Put(raw)
		} else if grpcFirst {
			first.g = mem.NewBuffer(raw, pool)
		} else {
			first.m = membuf.NewBuffer(raw, pool)
		}
		refs := []bridgeRef{first}
		nextGroup := 1
		shared := func(r bridgeRef) bool {
			k := 0
			for _, o := range refs {
				if o.group == r.group {
					k++
				}
			}
			return k > 1
		}
		for i := 0; i < len(ops) && len(refs) > 0; i++ {
			op := ops[i]
			if debugFuzz {
				t.Logf("op %d: %d on %d (of %d)", i, op&7, int(op>>4)%len(refs), len(refs))
			}
			j := int(op>>4) % len(refs)
			r := refs[j]
			arg := 0
			if i+1 < len(ops) {
				arg = int(ops[i+1])
			}
			switch op & 7 {
			case 0: // convert, handing over this entry's reference
				if shared(r) {
					continue
				}
				if r.g != nil {
					r.m, r.g = FromGRPC(r.g), nil
				} else {
					r.g = ToGRPC(r.m)
					if _, copied := r.g.(mem.SliceBuffer); copied {
						r.pooled = false
					}
				}
				refs[j] = r
			case 1: // Ref
				if r.g != nil {
					r.g.Ref()
				} else {
					r.m.Ref()
				}
				refs = append(refs, r)
			case 2, 3: // Free
				if r.g != nil {
					r.g.Free()
				} else {
					r.m.Free()
				}
				refs = append(refs[:j], refs[j+1:]...)
			case 4: // Slice
				lo := arg % (len(r.want) + 1)
				hi := lo + (arg*7)%(len(r.want)-lo+1)
				s := bridgeRef{want: r.want[lo:hi], group: nextGroup, pooled: r.pooled}
				nextGroup++
				if r.g != nil {
					s.g = r.g.Slice(lo, hi)
					if hi-lo == len(r.want) {
						// grpc-go returns the same buffer with a new
						// reference: it is shared, like Ref.
						s.group = r.group
					}
				} else {
					s.m = r.m.Slice(lo, hi)
				}
				if lo == hi {
					s.pooled = false
				}
				refs = append(refs, s)
				i++
			case 5: // Split, which needs the only reference
				if shared(r) {
					continue
				}
				at := arg % (len(r.want) + 1)
				right := bridgeRef{want: r.want[at:], group: nextGroup, pooled: r.pooled}
				nextGroup++
				if r.g != nil {
					r.g, right.g = mem.SplitUnsafe(r.g, at)
				} else {
					right.m = r.m.Split(at)
				}
				r.want = r.want[:at]
				refs[j] = r
				refs = append(refs, right)
				i++
			default: // check every entry
				for _, o := range refs {
					if !bytes.Equal(o.bytes(), o.want) {
						t.Fatalf("op %d: a view shows %x, want %x", i, head(o.bytes()), head(o.want))
					}
				}
			}
			alive := false
			for _, o := range refs {
				// An empty view need not keep any memory.
				alive = alive || (o.pooled && len(o.want) > 0)
			}
			if alive && pool.outstanding() != 1 {
				t.Fatalf("op %d: the pooled memory went back while a view of it is alive", i)
			}
		}
		for _, o := range refs {
			if !bytes.Equal(o.bytes(), o.want) {
				t.Fatalf("end: a view shows %x, want %x", head(o.bytes()), head(o.want))
			}
			if o.g != nil {
				o.g.Free()
			} else {
				o.m.Free()
			}
		}
		pool.check()
	})
}
