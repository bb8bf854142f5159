package grpcmem

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of build.bazel.remote.execution.v2.BatchUpdateBlobsRequest,
// its Request and Digest (remote_execution.proto).
const (
	batchUpdateInstanceName   protowire.Number = 1
	batchUpdateRequests       protowire.Number = 2
	batchUpdateDigestFunction protowire.Number = 5

	batchBlobDigest     protowire.Number = 1
	batchBlobData       protowire.Number = 2
	batchBlobCompressor protowire.Number = 3

	digestHash      protowire.Number = 1
	digestSizeBytes protowire.Number = 2
)

// BatchUpdateRequest is the REAPI's BatchUpdateBlobsRequest
// (build.bazel.remote.execution.v2) as a server receives it through
// [Codec]: parsed straight from the buffers gRPC received it in, each blob's
// Data holding references into those buffers (which come from the server's
// buffer pool) instead of a copy. A build's small outputs travel in these
// batches, up to the server's max_batch_total_size_bytes each, so the copy
// proto.Unmarshal makes of every blob would be garbage per byte uploaded.
//
// A unary handler receives one by passing it to the dec function grpc-go
// gives it, in place of the generated type, and frees it once it has
// written the data:
//
//	req := new(grpcmem.BatchUpdateRequest)
//	if err := dec(req); err != nil { ... }
//	defer req.Free()
//
// Only a server that runs [Codec] may do that: grpc-go's own proto codec
// cannot unmarshal a BatchUpdateRequest.
type BatchUpdateRequest struct {
	InstanceName   string
	Blobs          []BatchUpdateBlob
	DigestFunction int32 // the DigestFunction.Value enum
}

// BatchUpdateBlob is one BatchUpdateBlobsRequest.Request: a blob, its
// digest and the compressor its data is in.
type BatchUpdateBlob struct {
	// Digest is the request's digest; HasDigest is false when the request
	// carried none (the generated type's nil).
	Digest    Digest
	HasDigest bool
	// Data holds references into the received buffers: the receiver owns
	// one reference to each and must free them (BatchUpdateRequest.Free
	// does) or take them over.
	Data       membuf.Slice
	Compressor int32 // the Compressor.Value enum
}

// Digest is build.bazel.remote.execution.v2.Digest.
type Digest struct {
	Hash      string
	SizeBytes int64
}

// Free releases the references in every blob's Data.
func (m *BatchUpdateRequest) Free() {
	for i := range m.Blobs {
		m.Blobs[i].Data.Free()
		m.Blobs[i].Data = nil
	}
}

// unmarshal parses the wire form of a BatchUpdateBlobsRequest from bufs,
// which the caller keeps its references on. It accepts exactly what
// proto.Unmarshal accepts for the generated type and gives the same fields:
// the last occurrence of a scalar wins, a digest that occurs twice in one
// request is merged field by field, fields of unknown number or of an
// unexpected wire type are skipped, strings must be valid UTF-8 (proto3).
// On error the message is left zero and no reference is taken.
func (m *BatchUpdateRequest) unmarshal(bufs mem.BufferSlice) error {
	if len(m.Blobs) != 0 {
		return errors.New("grpcmem: BatchUpdateRequest already holds blobs; receive into a new one")
	}
	var (
		r        wireReader
		name     span
		haveName bool
		function int32
		blobs    []parsedBlob
	)
	r.init(bufs)
	err := r.eachField(func(num protowire.Number, typ protowire.Type) (known bool, err error) {
		switch {
		case num == batchUpdateInstanceName && typ == protowire.BytesType:
			if name, err = r.bytesField("instance_name"); err != nil {
				return true, err
			}
			haveName = true
			if !utf8.Valid(r.bytes(name)) {
				return true, errors.New("instance_name: invalid UTF-8")
			}
		case num == batchUpdateRequests && typ == protowire.BytesType:
			sp, err := r.bytesField("requests")
			if err != nil {
				return true, err
			}
			b, err := parseBatchBlob(r.sub(sp))
			if err != nil {
				return true, fmt.Errorf("requests[%d]: %w", len(blobs), err)
			}
			blobs = append(blobs, b)
		case num == batchUpdateDigestFunction && typ == protowire.VarintType:
			v, err := r.varintField("digest_function")
			function = int32(v)
			return true, err
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return fmt.Errorf("grpcmem: parsing build.bazel.remote.execution.v2.BatchUpdateBlobsRequest: %w", err)
	}

	// The whole message parsed: only now take references, so that the error
	// paths above have nothing to release.
	m.DigestFunction = function
	m.InstanceName = ""
	if haveName {
		m.InstanceName = string(r.bytes(name))
	}
	m.Blobs = make([]BatchUpdateBlob, len(blobs))
	for i, b := range blobs {
		m.Blobs[i] = BatchUpdateBlob{Digest: b.digest, HasDigest: b.hasDigest, Compressor: b.compressor}
		m.Blobs[i].Data = r.appendRefs(nil, b.data)
	}
	return nil
}

// parsedBlob is a Request parsed, its data not yet referenced.
type parsedBlob struct {
	digest     Digest
	hasDigest  bool
	data       span
	compressor int32
}

func parseBatchBlob(r wireReader) (parsedBlob, error) {
	var b parsedBlob
	err := r.eachField(func(num protowire.Number, typ protowire.Type) (known bool, err error) {
		switch {
		case num == batchBlobDigest && typ == protowire.BytesType:
			sp, err := r.bytesField("digest")
			if err != nil {
				return true, err
			}
			// A message field that occurs again is merged into what came
			// before, as proto.Unmarshal does.
			b.hasDigest = true
			if err := parseDigest(r.sub(sp), &b.digest); err != nil {
				return true, fmt.Errorf("digest: %w", err)
			}
		case num == batchBlobData && typ == protowire.BytesType:
			b.data, err = r.bytesField("data")
		case num == batchBlobCompressor && typ == protowire.VarintType:
			var v uint64
			v, err = r.varintField("compressor")
			b.compressor = int32(v)
		default:
			return false, nil
		}
		return true, err
	})
	return b, err
}

func parseDigest(r wireReader, d *Digest) error {
	return r.eachField(func(num protowire.Number, typ protowire.Type) (known bool, err error) {
		switch {
		case num == digestHash && typ == protowire.BytesType:
			sp, err := r.bytesField("hash")
			if err != nil {
				return true, err
			}
			h := r.bytes(sp)
			if !utf8.Valid(h) {
				return true, errors.New("hash: invalid UTF-8")
			}
			d.Hash = string(h)
		case num == digestSizeBytes && typ == protowire.VarintType:
			v, err := r.varintField("size_bytes")
			d.SizeBytes = int64(v)
			return true, err
		default:
			return false, nil
		}
		return true, nil
	})
}
