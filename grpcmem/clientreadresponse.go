package grpcmem

import (
	"errors"
	"fmt"

	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// ClientReadResponse is google.bytestream.ReadResponse as a client receives
// it with [Codec] as the call's codec ([CallOption]): Data holds references
// into the buffers gRPC received the message in (from the client's buffer
// pool, experimental.WithBufferPool) instead of a copy.
//
// A client receives one by passing it to the Read stream's RecvMsg in place
// of the generated type, and may reuse it for every message of the stream:
//
//	var resp grpcmem.ClientReadResponse
//	for {
//		err := stream.RecvMsg(&resp)
//		if err == io.EOF { break }
//		if err != nil { ... }
//		... use resp.Data ...
//		resp.Free()
//	}
type ClientReadResponse struct {
	// Data is the data field, as references into the received buffers: the
	// receiver owns one reference to each and must free them (Free does), or
	// take them over, before it receives again into the same message.
	Data membuf.Slice
}

// Free releases the references in Data and empties it, keeping its capacity
// for the next message.
func (m *ClientReadResponse) Free() {
	m.Data.Free()
	clear(m.Data)
	m.Data = m.Data[:0]
}

// unmarshal parses the wire form of a ReadResponse from bufs, which the
// caller keeps its references on. It accepts exactly what proto.Unmarshal
// accepts for bytestream.ReadResponse and gives the same data: the last
// occurrence wins, other fields are skipped. On error Data is left empty and
// no reference is taken.
func (m *ClientReadResponse) unmarshal(bufs mem.BufferSlice) error {
	if len(m.Data) != 0 {
		return errReadDataNotFreed
	}
	var r wireReader
	var data span
	r.init(bufs)
	err := r.eachField(func(num protowire.Number, typ protowire.Type) (known bool, err error) {
		if num == readResponseData && typ == protowire.BytesType {
			data, err = r.bytesField("data")
			return true, err
		}
		return false, nil
	})
	if err != nil {
		return readResponseError(err)
	}
	// The whole message parsed: only now take references.
	m.Data = r.appendRefs(m.Data, data)
	return nil
}

var errReadDataNotFreed = errors.New("grpcmem: ClientReadResponse.Data still holds the buffers of the previous message; Free them (ClientReadResponse.Free) or take them before receiving into it again")

func readResponseError(err error) error {
	return fmt.Errorf("grpcmem: parsing google.bytestream.ReadResponse: %w", err)
}
