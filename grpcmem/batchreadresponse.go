package grpcmem

import (
	"strconv"

	"github.com/membuf/membuf"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Field numbers of build.bazel.remote.execution.v2.BatchReadBlobsResponse
// and its Response (remote_execution.proto).
const (
	batchReadResponses protowire.Number = 1

	batchReadDigest     protowire.Number = 1
	batchReadData       protowire.Number = 2
	batchReadStatus     protowire.Number = 3
	batchReadCompressor protowire.Number = 4
)

// BatchReadResponse is the REAPI's BatchReadBlobsResponse
// (build.bazel.remote.execution.v2) sent without copying its blobs:
// [Codec] marshals the fields around each blob's data into one small
// buffer and hands Data's buffers to gRPC by reference, as it does a
// [ReadResponse]'s. A unary handler on a server that runs Codec returns one
// in place of the generated type; the blobs can then be read into pooled
// buffers, where the generated type needs a fresh slice per blob that
// lives until the response is written.
//
// Marshalling takes over the references in every blob's Data: gRPC frees
// them once the bytes are on the wire. A response that is never marshalled
// (a handler's interceptor that replaces it with an error) is not freed;
// its buffers are garbage, not corruption. Do not use or change a
// BatchReadResponse after returning it.
type BatchReadResponse struct {
	Blobs []BatchReadBlob

	marshaled bool
	total     int // bytes of data, for String
}

// BatchReadBlob is one BatchReadBlobsResponse.Response.
type BatchReadBlob struct {
	Digest     Digest
	Data       membuf.Slice
	Status     *statuspb.Status // nil: none (proto3's default, OK)
	Compressor int32            // the Compressor.Value enum
}

// marshal returns the wire form of m, exactly what proto.Marshal gives for
// the generated type with the same fields (fields in number order, empty
// ones left out), handing the blobs' references to gRPC.
func (m *BatchReadResponse) marshal() (mem.BufferSlice, error) {
	m.marshaled = true
	// Each blob is its response's header up to the data's length, the data
	// by reference, then the status and compressor: every byte but the
	// data goes into one buffer, cut into a piece before and after each
	// blob's data.
	var hdr []byte
	cuts := make([]int, 0, 2*len(m.Blobs)) // where hdr is cut, around each blob's data
	for i := range m.Blobs {
		b := &m.Blobs[i]
		n := b.Data.Len()
		m.total += n
		digestLen := digestSize(b.Digest)
		size := protowire.SizeTag(batchReadDigest) + protowire.SizeBytes(digestLen)
		if n > 0 {
			size += protowire.SizeTag(batchReadData) + protowire.SizeBytes(n)
		}
		statusLen := 0
		if b.Status != nil {
			statusLen = proto.Size(b.Status)
			size += protowire.SizeTag(batchReadStatus) + protowire.SizeBytes(statusLen)
		}
		if b.Compressor != 0 {
			size += protowire.SizeTag(batchReadCompressor) + protowire.SizeVarint(uint64(int64(b.Compressor)))
		}
		hdr = protowire.AppendTag(hdr, batchReadResponses, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(size))
		hdr = protowire.AppendTag(hdr, batchReadDigest, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(digestLen))
		hdr = appendDigest(hdr, b.Digest)
		if n > 0 {
			hdr = protowire.AppendTag(hdr, batchReadData, protowire.BytesType)
			hdr = protowire.AppendVarint(hdr, uint64(n))
		}
		cuts = append(cuts, len(hdr))
		if b.Status != nil {
			hdr = protowire.AppendTag(hdr, batchReadStatus, protowire.BytesType)
			hdr = protowire.AppendVarint(hdr, uint64(statusLen))
			var err error
			if hdr, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(hdr, b.Status); err != nil {
				m.free()
				return nil, err
			}
		}
		if b.Compressor != 0 {
			hdr = protowire.AppendTag(hdr, batchReadCompressor, protowire.VarintType)
			hdr = protowire.AppendVarint(hdr, uint64(int64(b.Compressor))) // an enum is an int32, sign-extended
		}
		cuts = append(cuts, len(hdr))
	}
	out := make(mem.BufferSlice, 0, 2*len(m.Blobs)+len(m.Blobs))
	prev := 0
	for i := range m.Blobs {
		out = appendPiece(out, hdr[prev:cuts[2*i]])
		out = AppendToGRPC(out, m.Blobs[i].Data)
		m.Blobs[i].Data = nil // gRPC's now
		out = appendPiece(out, hdr[cuts[2*i]:cuts[2*i+1]])
		prev = cuts[2*i+1]
	}
	return out, nil
}

// appendPiece appends p, a piece of the header bytes, unless it is empty.
func appendPiece(out mem.BufferSlice, p []byte) mem.BufferSlice {
	if len(p) == 0 {
		return out
	}
	return append(out, mem.SliceBuffer(p))
}

// free releases the blobs' references, for a response that is not sent.
func (m *BatchReadResponse) free() {
	for i := range m.Blobs {
		m.Blobs[i].Data.Free()
		m.Blobs[i].Data = nil
	}
}

func digestSize(d Digest) int {
	n := 0
	if d.Hash != "" {
		n += protowire.SizeTag(digestHash) + protowire.SizeBytes(len(d.Hash))
	}
	if d.SizeBytes != 0 {
		n += protowire.SizeTag(digestSizeBytes) + protowire.SizeVarint(uint64(d.SizeBytes))
	}
	return n
}

func appendDigest(b []byte, d Digest) []byte {
	if d.Hash != "" {
		b = protowire.AppendTag(b, digestHash, protowire.BytesType)
		b = protowire.AppendString(b, d.Hash)
	}
	if d.SizeBytes != 0 {
		b = protowire.AppendTag(b, digestSizeBytes, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(d.SizeBytes))
	}
	return b
}

// String describes m without reading the blobs' data, which after a send
// belongs to gRPC (grpc-go's tracing formats sent messages later).
func (m *BatchReadResponse) String() string {
	if m.marshaled {
		return "grpcmem.BatchReadResponse(sent " + strconv.Itoa(len(m.Blobs)) + " blobs, " + strconv.Itoa(m.total) + " bytes)"
	}
	return "grpcmem.BatchReadResponse(unsent, " + strconv.Itoa(len(m.Blobs)) + " blobs)"
}
