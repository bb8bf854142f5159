package loadgen

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// blobCodec is the blobs workload's client codec. It keeps the client from
// allocating per chunk, so that the process's GC figures are mostly the
// server's: a *readChunk is a google.bytestream.ReadResponse whose data is
// counted, not copied; a *writeChunk is a google.bytestream.WriteRequest
// whose data is sent by reference. Every other message goes to grpc-go's
// proto codec. It speaks protobuf exactly, so any ByteStream server works.
type blobCodec struct {
	proto encoding.CodecV2
}

func newBlobCodec() blobCodec {
	c := encoding.GetCodecV2(proto.Name)
	if c == nil {
		panic("loadgen: grpc-go's proto codec is not registered")
	}
	return blobCodec{proto: c}
}

func (blobCodec) Name() string { return proto.Name }

func (c blobCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*writeChunk); ok {
		return m.marshal(), nil
	}
	return c.proto.Marshal(v)
}

func (c blobCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*readChunk); ok {
		return m.unmarshal(data)
	}
	return c.proto.Unmarshal(data, v)
}

// readChunk receives a ReadResponse: N is the length of its data field.
type readChunk struct {
	N int64
}

// The field numbers of google.bytestream messages.
const (
	fieldReadData      = 10
	fieldWriteName     = 1
	fieldWriteOffset   = 2
	fieldWriteFinish   = 3
	fieldWriteData     = 10
	maxVarintLen       = 10
	errMalformedPrefix = "malformed ReadResponse"
)

func (m *readChunk) unmarshal(data mem.BufferSlice) error {
	m.N = 0
	c := cursor{s: data}
	for !c.done() {
		tag, ok := c.varint()
		if !ok {
			return errors.New(errMalformedPrefix + ": truncated tag")
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		switch typ {
		case protowire.VarintType:
			if _, ok := c.varint(); !ok {
				return errors.New(errMalformedPrefix + ": truncated varint")
			}
		case protowire.Fixed32Type:
			ok = c.skip(4)
		case protowire.Fixed64Type:
			ok = c.skip(8)
		case protowire.BytesType:
			n, vok := c.varint()
			ok = vok && c.skip(n)
			if ok && num == fieldReadData {
				m.N = int64(n) // the last occurrence wins, as in proto
			}
		default:
			return fmt.Errorf("%s: wire type %d of field %d", errMalformedPrefix, typ, num)
		}
		if !ok {
			return fmt.Errorf("%s: field %d runs past the end", errMalformedPrefix, num)
		}
	}
	return nil
}

// cursor reads a mem.BufferSlice byte by byte without joining its buffers.
type cursor struct {
	s mem.BufferSlice
	i int
	b []byte
}

func (c *cursor) fill() bool {
	for len(c.b) == 0 {
		if c.i >= len(c.s) {
			return false
		}
		c.b = c.s[c.i].ReadOnlyData()
		c.i++
	}
	return true
}

func (c *cursor) done() bool { return !c.fill() }

func (c *cursor) varint() (uint64, bool) {
	var v uint64
	for i := range maxVarintLen {
		if !c.fill() {
			return 0, false
		}
		b := c.b[0]
		c.b = c.b[1:]
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, true
		}
	}
	return 0, false
}

func (c *cursor) skip(n uint64) bool {
	for n > 0 {
		if !c.fill() {
			return false
		}
		k := min(n, uint64(len(c.b)))
		c.b = c.b[k:]
		n -= k
	}
	return true
}

// writeChunk sends a WriteRequest whose data, Data followed by Tail, is
// passed to gRPC by reference: both must stay unchanged until the Write call
// has returned its response. Send a new writeChunk each time: gRPC may still
// hold the slices Marshal returned after SendMsg returns, and the header and
// the slice headers live in the message, so that marshalling it allocates
// nothing.
type writeChunk struct {
	ResourceName string
	WriteOffset  int64
	FinishWrite  bool
	Data, Tail   []byte

	hdr                      [192]byte // room for an upload name and the varints
	hdrBuf, dataBuf, tailBuf mem.SliceBuffer
	out                      [3]mem.Buffer
}

func (m *writeChunk) marshal() mem.BufferSlice {
	hdr := m.hdr[:0]
	if m.ResourceName != "" {
		hdr = protowire.AppendTag(hdr, fieldWriteName, protowire.BytesType)
		hdr = protowire.AppendString(hdr, m.ResourceName)
	}
	if m.WriteOffset != 0 {
		hdr = protowire.AppendTag(hdr, fieldWriteOffset, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, uint64(m.WriteOffset))
	}
	if m.FinishWrite {
		hdr = protowire.AppendTag(hdr, fieldWriteFinish, protowire.VarintType)
		hdr = protowire.AppendVarint(hdr, 1)
	}
	n := len(m.Data) + len(m.Tail)
	if n > 0 {
		hdr = protowire.AppendTag(hdr, fieldWriteData, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(n))
	}
	// Pointers to the SliceBuffers in m: boxing a SliceBuffer value into a
	// mem.Buffer would allocate.
	m.hdrBuf = hdr
	out := append(m.out[:0], &m.hdrBuf)
	if len(m.Data) > 0 {
		m.dataBuf = m.Data
		out = append(out, &m.dataBuf)
	}
	if len(m.Tail) > 0 {
		m.tailBuf = m.Tail
		out = append(out, &m.tailBuf)
	}
	return out
}
