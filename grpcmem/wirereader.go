package grpcmem

import (
	"errors"
	"fmt"

	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// wireReader reads protobuf wire format from a mem.BufferSlice in place,
// without joining its buffers: a message received by gRPC arrives as the
// buffers of the HTTP/2 frames it came in, split anywhere, tags and varints
// included.
type wireReader struct {
	bufs mem.BufferSlice
	i    int    // the buffer cur lies in
	off  int    // where cur starts in bufs[i]
	cur  []byte // the unread bytes of bufs[i]
	rest int    // unread bytes in all buffers
}

// A span is a run of bytes in the buffers, from offset off of buffer i.
type span struct {
	i, off, n int
}

func (r *wireReader) init(bufs mem.BufferSlice) {
	*r = wireReader{bufs: bufs, i: -1, rest: bufs.Len()}
	r.nextBuffer()
}

// nextBuffer moves cur to the next non-empty buffer if cur is used up. cur
// never reaches past rest: a sub-reader ends where its message does.
func (r *wireReader) nextBuffer() {
	for len(r.cur) == 0 && r.rest > 0 && r.i+1 < len(r.bufs) {
		r.i++
		r.off = 0
		r.cur = r.bufs[r.i].ReadOnlyData()
	}
	if len(r.cur) > r.rest {
		r.cur = r.cur[:r.rest]
	}
}

// sub returns a reader of the bytes of sp alone: the value of a
// length-delimited field, to be read as a message of its own.
func (r *wireReader) sub(sp span) wireReader {
	s := wireReader{bufs: r.bufs, i: sp.i, off: sp.off, rest: sp.n}
	if sp.n > 0 {
		s.cur = r.bufs[sp.i].ReadOnlyData()[sp.off:]
		if len(s.cur) > sp.n {
			s.cur = s.cur[:sp.n]
		}
		s.nextBuffer() // sp may start at the very end of buffer i
	}
	return s
}

// here returns the span of the next n bytes; n must be at most r.rest.
func (r *wireReader) here(n int) span { return span{r.i, r.off, n} }

// skip moves past n bytes; n must be at most r.rest.
func (r *wireReader) skip(n int) {
	for n > 0 {
		if n < len(r.cur) {
			r.cur = r.cur[n:]
			r.off += n
			r.rest -= n
			return
		}
		n -= len(r.cur)
		r.rest -= len(r.cur)
		r.off += len(r.cur)
		r.cur = nil
		r.nextBuffer()
	}
}

// peek copies the next bytes, up to len(dst) and no further than rest, into
// dst without moving.
func (r *wireReader) peek(dst []byte) int {
	dst = dst[:min(len(dst), r.rest)]
	n := copy(dst, r.cur)
	for i := r.i + 1; n < len(dst) && i < len(r.bufs); i++ {
		n += copy(dst[n:], r.bufs[i].ReadOnlyData())
	}
	return n
}

// varint reads a varint exactly as protowire.ConsumeVarint does, including
// its errors (truncated, overflow); n < 0 is a protowire error code.
func (r *wireReader) varint() (v uint64, n int) {
	v, n = protowire.ConsumeVarint(r.cur)
	if n < 0 && len(r.cur) < r.rest {
		// The varint may go on in the next buffer.
		var tmp [binaryMaxVarintLen]byte
		k := r.peek(tmp[:])
		v, n = protowire.ConsumeVarint(tmp[:k])
	}
	if n < 0 {
		return 0, n
	}
	r.skip(n)
	return v, n
}

const binaryMaxVarintLen = 10

// eachField reads a whole message: for each field it calls f with the
// field's number and wire type, with r at the field's value. f reads the
// value and returns true, or returns false to have the field skipped as
// unknown, exactly as protowire.ConsumeFieldValue skips it. It returns the
// first error, from reading a tag, from f, or from skipping.
func (r *wireReader) eachField(f func(num protowire.Number, typ protowire.Type) (bool, error)) error {
	for r.rest > 0 {
		num, typ, err := r.field()
		if err != nil {
			return err
		}
		known, err := f(num, typ)
		if err != nil {
			return err
		}
		if !known {
			if err := r.skipField(num, typ, protowire.DefaultRecursionLimit); err != nil {
				return fmt.Errorf("field %d: %w", num, err)
			}
		}
	}
	return nil
}

// bytesField reads the value of a length-delimited field and returns where
// its bytes are, naming the field in its error.
func (r *wireReader) bytesField(name string) (span, error) {
	l, err := r.length()
	if err != nil {
		return span{}, fmt.Errorf("%s: %w", name, err)
	}
	sp := r.here(l)
	r.skip(l)
	return sp, nil
}

// varintField reads the value of a varint field, naming the field in its
// error.
func (r *wireReader) varintField(name string) (uint64, error) {
	v, n := r.varint()
	if n < 0 {
		return 0, fmt.Errorf("%s: %w", name, protowire.ParseError(n))
	}
	return v, nil
}

// field reads the next field's tag: its number and wire type. It refuses,
// as protowire does, a truncated or overlong tag, a field number outside
// 1 to 2^29-1, and an end-group tag with no group open.
func (r *wireReader) field() (protowire.Number, protowire.Type, error) {
	tag, n := r.varint()
	if n < 0 {
		return 0, 0, fmt.Errorf("tag: %w", protowire.ParseError(n))
	}
	if f := tag >> 3; f < uint64(protowire.MinValidNumber) || f > uint64(protowire.MaxValidNumber) {
		return 0, 0, fmt.Errorf("invalid field number %d", f)
	}
	num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
	if typ == protowire.EndGroupType {
		return 0, 0, fmt.Errorf("field %d: end-group tag outside a group", num)
	}
	return num, typ, nil
}

// length reads the length prefix of a length-delimited field and checks it
// against what is left, as protowire.ConsumeBytes does.
func (r *wireReader) length() (int, error) {
	l, n := r.varint()
	if n < 0 {
		return 0, protowire.ParseError(n)
	}
	if l > uint64(r.rest) {
		return 0, errTruncated
	}
	return int(l), nil
}

var errTruncated = errors.New("unexpected end of input")

// skipField skips the value of a field with the given number and wire type,
// exactly as protowire.ConsumeFieldValue does: groups are skipped through
// their matching end-group tag, at most depth deep.
func (r *wireReader) skipField(num protowire.Number, typ protowire.Type, depth int) error {
	switch typ {
	case protowire.VarintType:
		if _, n := r.varint(); n < 0 {
			return protowire.ParseError(n)
		}
	case protowire.Fixed32Type:
		if r.rest < 4 {
			return errTruncated
		}
		r.skip(4)
	case protowire.Fixed64Type:
		if r.rest < 8 {
			return errTruncated
		}
		r.skip(8)
	case protowire.BytesType:
		l, err := r.length()
		if err != nil {
			return err
		}
		r.skip(l)
	case protowire.StartGroupType:
		if depth < 0 {
			return errors.New("exceeded maximum recursion depth")
		}
		for {
			v, n := r.varint()
			if n < 0 {
				return protowire.ParseError(n)
			}
			num2, typ2 := protowire.DecodeTag(v)
			if num2 < protowire.MinValidNumber {
				return errors.New("invalid field number")
			}
			if typ2 == protowire.EndGroupType {
				if num2 != num {
					return errors.New("mismatching end group marker")
				}
				return nil
			}
			if err := r.skipField(num2, typ2, depth-1); err != nil {
				return err
			}
		}
	case protowire.EndGroupType:
		return errors.New("mismatching end group marker")
	default:
		return errors.New("cannot parse reserved wire type")
	}
	return nil
}

// pieces calls f with each piece of sp: the buffer it lies in and its bytes.
func (r *wireReader) pieces(sp span, f func(b mem.Buffer, data []byte)) {
	for i, off, n := sp.i, sp.off, sp.n; n > 0; i, off = i+1, 0 {
		data := r.bufs[i].ReadOnlyData()[off:]
		if len(data) > n {
			data = data[:n]
		}
		if len(data) > 0 {
			f(r.bufs[i], data)
		}
		n -= len(data)
	}
}

// appendRefs appends to dst a membuf view of each piece of sp, taking a
// reference to the gRPC buffer it lies in, and returns dst.
func (r *wireReader) appendRefs(dst membuf.Slice, sp span) membuf.Slice {
	r.pieces(sp, func(gb mem.Buffer, piece []byte) {
		if _, ok := gb.(mem.SliceBuffer); ok {
			// Not reference-counted, and memory no pool reuses (grpc-go
			// makes these for frames of 1 KiB or less).
			dst = append(dst, membuf.Wrap(piece))
			return
		}
		gb.Ref()
		dst = append(dst, fromGRPCRef(gb, piece))
	})
	return dst
}

// contiguous returns the bytes of sp if they lie in one buffer.
func (r *wireReader) contiguous(sp span) ([]byte, bool) {
	if sp.n == 0 {
		return nil, true
	}
	data := r.bufs[sp.i].ReadOnlyData()[sp.off:]
	if len(data) < sp.n {
		return nil, false
	}
	return data[:sp.n], true
}

// bytes returns the bytes of sp, joined into a new slice if they are split.
func (r *wireReader) bytes(sp span) []byte {
	if b, ok := r.contiguous(sp); ok {
		return b
	}
	out := make([]byte, 0, sp.n)
	r.pieces(sp, func(_ mem.Buffer, data []byte) { out = append(out, data...) })
	return out
}
