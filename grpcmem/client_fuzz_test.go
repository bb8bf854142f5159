package grpcmem

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/membuf/membuf"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// FuzzWriteRequestMarshal checks that what a client sends with Codec is the
// very bytes proto.Marshal (deterministic) gives for the same
// WriteRequest, with the data field handed over as two buffers split at a
// point drawn from the input (as the last message of an upload sends the end
// of a prefix and a stamp), and that each buffer's reference reaches its
// pool exactly once, when gRPC would free the marshalled buffers.
func FuzzWriteRequestMarshal(f *testing.F) {
	f.Add("uploads/u/blobs/h/3", int64(0), false, []byte("abc"))
	f.Add("", int64(1<<40), true, []byte{})
	f.Add("", int64(-1), false, bytes.Repeat([]byte{9}, 3000))
	codec := NewCodec()
	f.Fuzz(func(t *testing.T, name string, off int64, finish bool, data []byte) {
		cut := 0
		if len(data) > 0 {
			cut = int(uint64(off) % uint64(len(data)+1))
		}
		pool := newCountingPool(t, 0)
		var slice membuf.Slice
		for _, piece := range [][]byte{data[:cut], data[cut:]} {
			b := membuf.Alloc(pool, len(piece))
			copy(b.Bytes(), piece)
			slice = append(slice, b)
		}
		m := &WriteRequest{ResourceName: name, WriteOffset: off, FinishWrite: finish, Data: slice}
		out, err := codec.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) != 0 {
			t.Fatalf("Marshal left %d buffers in Data; gRPC owns them now", len(m.Data))
		}
		wire := out.Materialize()
		out.Free() // what gRPC does once the message is written
		pool.check()
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&bytestream.WriteRequest{ResourceName: name, WriteOffset: off, FinishWrite: finish, Data: data})
		if err != nil {
			if !utf8.ValidString(name) {
				return // proto refuses to marshal a string field that is not UTF-8
			}
			t.Fatal(err)
		}
		if !bytes.Equal(wire, want) {
			t.Fatalf("sent %x, proto marshals %x", head(wire), head(want))
		}
	})
}

// FuzzClientReadResponseUnmarshal checks that Codec parses any input,
// split into buffers anywhere, exactly as proto.Unmarshal parses it into
// bytestream.ReadResponse: the same error or not, the same data. It also
// checks that Data survives gRPC freeing the received buffers (they are
// poisoned on return to their pool), and that every pooled buffer goes back
// exactly once, on success and on error.
func FuzzClientReadResponseUnmarshal(f *testing.F) {
	for _, m := range []*bytestream.ReadResponse{{}, {Data: []byte("x")}, {Data: bytes.Repeat([]byte{7}, 3000)}} {
		b, _ := proto.Marshal(m)
		f.Add(b, uint64(0))
		f.Add(b, uint64(0x9e3779b97f4a7c15))
	}
	f.Add([]byte{0x52, 0x80}, uint64(1))                      // truncated length
	f.Add([]byte{0x52, 0x05, 1, 2}, uint64(0))                // data runs past the end
	f.Add([]byte{0x08, 0x96, 0x01, 0x52, 0x01, 9}, uint64(5)) // an unknown varint field first
	f.Add([]byte{0x52, 0x01, 1, 0x52, 0x02, 2, 3}, uint64(3)) // data twice: the last wins
	f.Add([]byte{0x4b, 0x53, 0x08, 0x01, 0x54, 0x4c, 0x52, 0x01, 7}, uint64(0))
	f.Fuzz(func(t *testing.T, input []byte, cuts uint64) {
		var want bytestream.ReadResponse
		var got ClientReadResponse
		pool, err := unmarshalAsProto(t, input, cuts, &got, &want)
		if err != nil {
			if len(got.Data) != 0 {
				t.Fatalf("error left %d buffers in Data", len(got.Data))
			}
			pool.check()
			return
		}
		gotData := make([]byte, got.Data.Len())
		got.Data.CopyTo(gotData)
		if !bytes.Equal(gotData, want.Data) {
			t.Fatalf("input %x: data %x, proto says %x", input, head(gotData), head(want.Data))
		}
		got.Free()
		pool.check()
	})
}

func TestClientReadResponseRefusesUnfreedData(t *testing.T) {
	codec := NewCodec()
	msg, _ := proto.Marshal(&bytestream.ReadResponse{Data: []byte("chunk")})
	var m ClientReadResponse
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, &m); err != nil {
		t.Fatal(err)
	}
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, &m); err == nil || !bytes.Contains([]byte(err.Error()), []byte("Free")) {
		t.Fatalf("receiving into a message whose Data was not freed: %v; want an error saying to Free it", err)
	}
	m.Free()
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, &m); err != nil || m.Data.Len() != 5 {
		t.Fatalf("after Free: %v, %d bytes", err, m.Data.Len())
	}
	m.Free()
}
