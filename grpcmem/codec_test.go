package grpcmem

import (
	"bytes"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/internal/testenv"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

func TestCodecNameAndFallback(t *testing.T) {
	c := NewCodec()
	if c.Name() != "proto" {
		t.Fatalf("Name %q, want proto", c.Name())
	}
	// Anything else goes to the proto codec unchanged.
	in := &bytestream.QueryWriteStatusResponse{CommittedSize: 42, Complete: true}
	out, err := c.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(in)
	if !bytes.Equal(out.Materialize(), want) {
		t.Fatal("fallback Marshal differs from proto.Marshal")
	}
	var back bytestream.QueryWriteStatusResponse
	if err := c.Unmarshal(out, &back); err != nil || !proto.Equal(&back, in) {
		t.Fatalf("fallback Unmarshal: %v, %v", err, &back)
	}
	out.Free()
	// The generated ReadResponse is marshalled by proto too (with a copy).
	out, err = c.Marshal(&bytestream.ReadResponse{Data: []byte("abc")})
	if err != nil || !bytes.Equal(out.Materialize(), []byte{0x52, 3, 'a', 'b', 'c'}) {
		t.Fatalf("generated ReadResponse: %x, %v", out.Materialize(), err)
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Fatal("Marshal of a non-message: want an error")
	}
	var _ encoding.CodecV2 = c
}

func TestWriteRequestKeepsReferencesNotCopies(t *testing.T) {
	pool := newCountingPool(t, 0)
	payload := fill(make([]byte, 40000), 17)
	wire, _ := proto.Marshal(&bytestream.WriteRequest{ResourceName: "r", WriteOffset: 7, Data: payload})
	// Three "frames" of the server's pool.
	var bufs mem.BufferSlice
	for rest := wire; len(rest) > 0; {
		n := min(len(rest), 16384)
		raw := pool.Get(n)
		copy(*raw, rest[:n])
		bufs = append(bufs, mem.NewBuffer(raw, pool))
		rest = rest[n:]
	}
	var m WriteRequest
	if err := NewCodec().Unmarshal(bufs, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Data) != 3 {
		t.Fatalf("Data has %d buffers, want 3 (one per frame)", len(m.Data))
	}
	if &m.Data[1].Bytes()[0] != &bufs[1].ReadOnlyData()[0] {
		t.Fatal("Data was copied; want references into the received frames")
	}
	bufs.Free()
	if pool.outstanding() != 3 {
		t.Fatalf("%d frames still out after gRPC freed its references, want 3 held by Data", pool.outstanding())
	}
	got := make([]byte, m.Data.Len())
	m.Data.CopyTo(got)
	if !bytes.Equal(got, payload) {
		t.Fatal("Data changed after gRPC freed the frames")
	}
	// Receiving again before freeing Data is refused, not a leak.
	if err := NewCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &m); err == nil {
		t.Fatal("Unmarshal into a WriteRequest with live Data: want an error")
	}
	m.Free()
	pool.check()
}

func TestReadResponseSendsChunkByReference(t *testing.T) {
	pool := newCountingPool(t, 0)
	chunk := membuf.Alloc(pool, 65536)
	fill(chunk.Bytes(), 21)
	out, err := NewCodec().Marshal(&ReadResponse{Data: chunk})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Len() != 4 {
		t.Fatalf("got %d buffers, header %d bytes; want a 4-byte header and the chunk", len(out), out[0].Len())
	}
	if &out[1].ReadOnlyData()[0] != &chunk.Bytes()[0] {
		t.Fatal("chunk was copied")
	}
	pool.freeInTurn(out.Free) // gRPC frees the chunk once it is written
	pool.check()
}

func TestCodecAllocations(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	codec := NewCodec()
	data := make([]byte, 65536)
	msg := new(ReadResponse)
	if n := testing.AllocsPerRun(1000, func() {
		*msg = ReadResponse{Data: membuf.NewBuffer(&data, nil)}
		out, _ := codec.Marshal(msg)
		out.Free()
	}); n != 0 {
		t.Errorf("Marshal of a ReadResponse: %v allocations besides the message, want 0", n)
	}

	wire, _ := proto.Marshal(&bytestream.WriteRequest{ResourceName: "uploads/u/blobs/h/65536", WriteOffset: 1 << 20, Data: data})
	raw := make([]byte, len(wire))
	copy(raw, wire)
	var req WriteRequest
	in := make(mem.BufferSlice, 0, 4)
	if n := testing.AllocsPerRun(1000, func() {
		a, b := mem.SplitUnsafe(mem.NewBuffer(&raw, noPutPool{}), 30000)
		in = append(in[:0], a, b)
		if err := codec.Unmarshal(in, &req); err != nil {
			t.Fatal(err)
		}
		in.Free()
		req.Free()
	}); n != 0 {
		t.Errorf("Unmarshal of a WriteRequest into a reused message: %v allocations, want 0", n)
	}
}

// The benchmarks set Codec beside grpc-go's proto codec for 64 KiB chunks.
func BenchmarkMarshalReadResponse(b *testing.B) {
	data := make([]byte, 65536)
	b.Run("grpcmem", func(b *testing.B) {
		codec := NewCodec()
		b.ReportAllocs()
		for b.Loop() {
			out, _ := codec.Marshal(&ReadResponse{Data: membuf.NewBuffer(&data, nil)})
			out.Free()
		}
	})
	b.Run("proto", func(b *testing.B) {
		codec := encoding.GetCodecV2("proto")
		b.ReportAllocs()
		for b.Loop() {
			out, _ := codec.Marshal(&bytestream.ReadResponse{Data: data})
			out.Free()
		}
	})
}

func BenchmarkUnmarshalWriteRequest(b *testing.B) {
	wire, _ := proto.Marshal(&bytestream.WriteRequest{ResourceName: "uploads/u/blobs/h/65536", Data: make([]byte, 65536)})
	// 16 KiB frames, as HTTP/2 delivers them by default.
	var in mem.BufferSlice
	for rest := wire; len(rest) > 0; {
		n := min(len(rest), 16384)
		in = append(in, mem.SliceBuffer(rest[:n]))
		rest = rest[n:]
	}
	b.Run("grpcmem", func(b *testing.B) {
		codec := NewCodec()
		var req WriteRequest
		b.ReportAllocs()
		for b.Loop() {
			if err := codec.Unmarshal(in, &req); err != nil {
				b.Fatal(err)
			}
			req.Free()
		}
	})
	b.Run("proto", func(b *testing.B) {
		codec := encoding.GetCodecV2("proto")
		b.ReportAllocs()
		for b.Loop() {
			var req bytestream.WriteRequest
			if err := codec.Unmarshal(in, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestSendReadWithoutCodecFreesChunk(t *testing.T) {
	pool := newCountingPool(t, 0)
	chunk := membuf.Alloc(pool, 4096)
	err := SendRead(fakeStream{codec: encoding.GetCodecV2("proto")}, chunk)
	if err == nil {
		t.Fatal("SendRead through the proto codec: want an error")
	}
	pool.check() // freed, not leaked
	m := &ReadResponse{Data: membuf.Alloc(pool, 10)}
	if s := m.String(); s != "grpcmem.ReadResponse(unsent)" {
		t.Errorf("String %q", s)
	}
	out, _ := NewCodec().Marshal(m)
	out.Free()
	if s := m.String(); s != "grpcmem.ReadResponse(sent 10 bytes)" {
		t.Errorf("String %q", s)
	}
	pool.check()
}

// fakeStream is a grpc.ServerStream whose SendMsg only marshals, as grpc-go
// does first, with the codec it is given.
type fakeStream struct {
	grpc.ServerStream
	codec encoding.CodecV2
}

func (s fakeStream) SendMsg(m any) error {
	out, err := s.codec.Marshal(m)
	if err != nil {
		return err
	}
	out.Free()
	return nil
}

// A Checked receive never fails: a message that parses fills Msg with Err
// nil, in place for a WriteRequest and through the proto codec otherwise;
// one that does not leaves the reason in Err.
func TestCheckedReportsWhatDoesNotParse(t *testing.T) {
	c := NewCodec()
	good, err := proto.Marshal(&bytestream.ReadRequest{ResourceName: "blobs/x/1", ReadOffset: 5})
	if err != nil {
		t.Fatal(err)
	}
	var rr bytestream.ReadRequest
	ch := Checked{Msg: &rr}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(good)}, &ch); err != nil || ch.Err != nil || rr.ResourceName != "blobs/x/1" || rr.ReadOffset != 5 {
		t.Fatalf("a good ReadRequest: %v, %v, %+v", err, ch.Err, &rr)
	}
	var wr WriteRequest
	ch = Checked{Msg: &wr}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x4a, 0xff, 0xfe})}, &ch); err != nil || ch.Err == nil {
		t.Fatalf("a WriteRequest cut short: Unmarshal %v, Err %v; want nil and a reason", err, ch.Err)
	}
	ch = Checked{Msg: &rr}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x02, 0xff, 0xfe})}, &ch); err != nil || ch.Err == nil {
		t.Fatalf("a ReadRequest of invalid UTF-8: Unmarshal %v, Err %v; want nil and a reason", err, ch.Err)
	}
}
