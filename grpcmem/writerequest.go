package grpcmem

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of google.bytestream.WriteRequest.
const (
	writeRequestResourceName protowire.Number = 1
	writeRequestWriteOffset  protowire.Number = 2
	writeRequestFinishWrite  protowire.Number = 3
	writeRequestData         protowire.Number = 10
)

// WriteRequest is google.bytestream.WriteRequest received without copying
// its data: [Codec] parses it straight from the buffers gRPC received it in,
// and Data holds references into those buffers (which come from the
// server's buffer pool) instead of a copy.
//
// A handler receives one by passing it to the stream's RecvMsg in place of
// the generated type:
//
//	var req grpcmem.WriteRequest
//	for {
//		if err := stream.RecvMsg(&req); err != nil { ... }
//		... write req.Data ...
//		req.Free()
//	}
//
// A WriteRequest may be reused for every message of a stream, which is what
// keeps receiving free of allocations: Data keeps its capacity across Free.
type WriteRequest struct {
	ResourceName string
	WriteOffset  int64
	FinishWrite  bool
	// Data is the data field, as references into the received buffers: the
	// receiver owns one reference to each buffer and must free them (Free
	// does), or take them over, before it receives again into the same
	// WriteRequest.
	Data membuf.Slice
}

// Free releases the references in Data and empties it, keeping its capacity
// for the next message.
func (m *WriteRequest) Free() {
	m.Data.Free()
	clear(m.Data)
	m.Data = m.Data[:0]
}

// errDataNotFreed is returned instead of overwriting references.
var errDataNotFreed = errors.New("grpcmem: WriteRequest.Data still holds the buffers of the previous message; Free them (WriteRequest.Free) or take them before receiving into it again")

// unmarshal parses the wire form of a WriteRequest from bufs, which the
// caller keeps its references on. It accepts exactly what proto.Unmarshal
// accepts for bytestream.WriteRequest and gives the same fields: the last
// occurrence of a field wins, fields of unknown number or of an unexpected
// wire type are skipped (this type keeps no unknown fields), resource_name
// must be valid UTF-8 (proto3). On error the message is left zero and no
// reference is taken.
func (m *WriteRequest) unmarshal(bufs mem.BufferSlice) error {
	if len(m.Data) != 0 {
		return errDataNotFreed
	}
	var (
		r          wireReader
		name, data span
		haveName   bool
		offset     int64
		finish     bool
	)
	r.init(bufs)
	for r.rest > 0 {
		tag, n := r.varint()
		if n < 0 {
			return m.fail(fmt.Errorf("tag: %w", protowire.ParseError(n)))
		}
		if f := tag >> 3; f < uint64(protowire.MinValidNumber) || f > uint64(protowire.MaxValidNumber) {
			return m.fail(fmt.Errorf("invalid field number %d", f))
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		switch {
		case typ == protowire.EndGroupType:
			return m.fail(fmt.Errorf("field %d: end-group tag outside a group", num))
		case num == writeRequestResourceName && typ == protowire.BytesType:
			l, err := r.length()
			if err != nil {
				return m.fail(fmt.Errorf("resource_name: %w", err))
			}
			name, haveName = r.here(l), true
			if !utf8.Valid(r.bytes(name)) {
				return m.fail(errors.New("resource_name: invalid UTF-8"))
			}
			r.skip(l)
		case num == writeRequestWriteOffset && typ == protowire.VarintType:
			v, n := r.varint()
			if n < 0 {
				return m.fail(fmt.Errorf("write_offset: %w", protowire.ParseError(n)))
			}
			offset = int64(v)
		case num == writeRequestFinishWrite && typ == protowire.VarintType:
			v, n := r.varint()
			if n < 0 {
				return m.fail(fmt.Errorf("finish_write: %w", protowire.ParseError(n)))
			}
			finish = protowire.DecodeBool(v)
		case num == writeRequestData && typ == protowire.BytesType:
			l, err := r.length()
			if err != nil {
				return m.fail(fmt.Errorf("data: %w", err))
			}
			data = r.here(l)
			r.skip(l)
		default:
			if err := r.skipField(num, typ, protowire.DefaultRecursionLimit); err != nil {
				return m.fail(fmt.Errorf("field %d: %w", num, err))
			}
		}
	}

	// The whole message parsed: only now take references, so that the error
	// paths above have nothing to release.
	m.WriteOffset = offset
	m.FinishWrite = finish
	if haveName {
		m.setResourceName(&r, name)
	} else {
		m.ResourceName = ""
	}
	r.pieces(data, func(gb mem.Buffer, piece []byte) {
		if _, ok := gb.(mem.SliceBuffer); ok {
			// Not reference-counted, and memory no pool reuses (grpc-go
			// makes these for frames of 1 KiB or less).
			m.Data = append(m.Data, membuf.Wrap(piece))
			return
		}
		gb.Ref()
		m.Data = append(m.Data, fromGRPCRef(gb, piece))
	})
	return nil
}

// setResourceName sets ResourceName from sp, keeping the current string if
// it is the same, as it is when a WriteRequest is reused for a stream whose
// every message repeats the name: that saves an allocation per message.
func (m *WriteRequest) setResourceName(r *wireReader, sp span) {
	if b, ok := r.contiguous(sp); ok {
		if string(b) != m.ResourceName { // no allocation for the comparison
			m.ResourceName = string(b)
		}
		return
	}
	m.ResourceName = string(r.bytes(sp))
}

// fail zeroes the message and returns err, wrapped to name the message.
func (m *WriteRequest) fail(err error) error {
	m.ResourceName, m.WriteOffset, m.FinishWrite = "", 0, false
	return fmt.Errorf("grpcmem: parsing google.bytestream.WriteRequest: %w", err)
}
