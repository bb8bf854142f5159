package grpcmem

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/membuf/membuf"
	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// FuzzReadResponseMarshal checks that Codec marshals a ReadResponse to the
// very bytes proto.Marshal (deterministic) gives for the same data, and that
// the chunk's reference reaches its pool exactly once, when gRPC would free
// the marshalled buffers.
func FuzzReadResponseMarshal(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte("hello"), uint16(4096))
	f.Add(bytes.Repeat([]byte{0xab}, 1500), uint16(0))
	f.Add(bytes.Repeat([]byte{1}, 20000), uint16(3))
	codec := NewCodec()
	f.Fuzz(func(t *testing.T, data []byte, viewStart uint16) {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&bytestream.ReadResponse{Data: data})
		if err != nil {
			t.Fatal(err)
		}
		// The chunk: a view into a pooled buffer, starting viewStart bytes in,
		// so that both the by-reference and the copied (small) paths run.
		pool := newCountingPool(t, 0)
		lead := int(viewStart) % 2048
		root := membuf.Alloc(pool, lead+len(data))
		copy(root.Bytes()[lead:], data)
		chunk := root
		if lead > 0 {
			chunk = root.Slice(lead, lead+len(data))
			root.Free()
		}
		out, err := codec.Marshal(&ReadResponse{Data: chunk})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("Marshal of %d bytes:\n got %x\nwant %x", len(data), head(got), head(want))
		}
		out.Free() // what gRPC does once the message is written
		pool.check()
	})
}

func head(b []byte) []byte { return b[:min(len(b), 32)] }

// FuzzWriteRequestUnmarshal checks that Codec parses any input, split into
// buffers anywhere, exactly as proto.Unmarshal parses it into
// bytestream.WriteRequest: the same error or not, the same fields. It also
// checks that Data survives gRPC freeing the received buffers (they are
// poisoned on return to their pool), and that every pooled buffer goes back
// exactly once, on success and on error.
func FuzzWriteRequestUnmarshal(f *testing.F) {
	for _, seed := range writeRequestSeeds() {
		f.Add(seed, uint64(0))
		f.Add(seed, uint64(0x9e3779b97f4a7c15))
	}
	f.Fuzz(func(t *testing.T, input []byte, cuts uint64) {
		var want bytestream.WriteRequest
		var got WriteRequest
		pool, err := unmarshalAsProto(t, input, cuts, &got, &want)
		if err != nil {
			if len(got.Data) != 0 || got.ResourceName != "" || got.WriteOffset != 0 || got.FinishWrite {
				t.Fatalf("error left fields set: %+v", got)
			}
			pool.check()
			return
		}
		gotData := make([]byte, got.Data.Len())
		got.Data.CopyTo(gotData)
		if got.ResourceName != want.ResourceName || got.WriteOffset != want.WriteOffset ||
			got.FinishWrite != want.FinishWrite || !bytes.Equal(gotData, want.Data) {
			t.Fatalf("input %x:\n got name %q offset %d finish %v data %x\nwant name %q offset %d finish %v data %x",
				input, got.ResourceName, got.WriteOffset, got.FinishWrite, head(gotData),
				want.ResourceName, want.WriteOffset, want.FinishWrite, head(want.Data))
		}
		got.Free()
		pool.check()
	})
}

// unmarshalAsProto parses input with Codec into got, from buffers cut at
// points drawn from cuts, and with proto.Unmarshal into want, and fails the
// test unless both fail or both succeed. It frees the buffers, as gRPC does
// when Unmarshal returns, and returns their pool for the caller to check
// once it has freed got, and Codec's error.
func unmarshalAsProto(t *testing.T, input []byte, cuts uint64, got any, want proto.Message) (*countingPool, error) {
	t.Helper()
	wantErr := proto.Unmarshal(input, want)
	pool := newCountingPool(t, 2048) // every pooled buffer is reference-counted by grpc-go
	bufs := splitIntoBuffers(input, cuts, pool)
	err := NewCodec().Unmarshal(bufs, got)
	bufs.Free()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("input %x: Codec error %v, proto error %v", input, err, wantErr)
	}
	return pool, err
}

// splitIntoBuffers copies input into buffers cut at points drawn from cuts,
// as gRPC's frames would deliver it: pieces alternate between pooled,
// reference-counted buffers and plain SliceBuffers, and pooled pieces are
// sometimes split children of one pooled buffer.
func splitIntoBuffers(input []byte, cuts uint64, pool *countingPool) mem.BufferSlice {
	var out mem.BufferSlice
	state := cuts | 1
	for len(input) > 0 {
		state = nextCut(state)
		n := len(input)
		if cuts != 0 {
			n = 1 + int(state%uint64(min(len(input), 64)))
			if state&(1<<40) != 0 {
				n = len(input) // sometimes take the rest in one
			}
		}
		piece := input[:n]
		input = input[n:]
		switch state >> 62 {
		case 0:
			out = append(out, mem.SliceBuffer(bytes.Clone(piece)))
		case 1:
			if len(piece) >= 2 {
				raw := pool.Get(len(piece))
				copy(*raw, piece)
				l, r := mem.SplitUnsafe(mem.NewBuffer(raw, pool), len(piece)/2)
				out = append(out, l, r)
				continue
			}
			fallthrough
		default:
			raw := pool.Get(len(piece))
			copy(*raw, piece)
			out = append(out, mem.NewBuffer(raw, pool))
		}
	}
	return out
}

// nextCut steps the xorshift generator that draws where inputs are cut
// into pieces.
func nextCut(state uint64) uint64 {
	state ^= state << 13
	state ^= state >> 7
	state ^= state << 17
	return state
}

// mustMarshal is proto.Marshal of a seed that must marshal.
func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// writeRequestSeeds are inputs for the fuzz test's corpus: valid messages,
// odd but valid ones, and malformed ones.
func writeRequestSeeds() [][]byte {
	valid := func(m *bytestream.WriteRequest) []byte { return mustMarshal(m) }
	full := valid(&bytestream.WriteRequest{
		ResourceName: "uploads/1/blobs/abc/5", WriteOffset: 1 << 40, FinishWrite: true,
		Data: bytes.Repeat([]byte("x"), 3000),
	})
	varint := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		{},
		full,
		valid(&bytestream.WriteRequest{WriteOffset: -1}),
		valid(&bytestream.WriteRequest{Data: []byte("a")}),
		// Repeated fields: the last wins.
		cat(full, valid(&bytestream.WriteRequest{ResourceName: "b", Data: []byte("second")})),
		// Unknown fields of every wire type, a group with a nested group.
		cat([]byte{0x28, 0x05, 0x35, 1, 2, 3, 4, 0x39, 1, 2, 3, 4, 5, 6, 7, 8, 0x42, 2, 'h', 'i'},
			[]byte{0x4b, 0x53, 0x08, 0x01, 0x54, 0x4c}, full),
		// Known fields with the wrong wire type are unknown fields.
		cat([]byte{0x08, 0x01, 0x15, 1, 2, 3, 4, 0x1a, 0x01, 0x00, 0x50, 0x07}, full),
		// Non-minimal varints.
		{0x90, 0x00, 0x05, 0x18, 0x81, 0x80, 0x00},
		// Malformed: truncated tag, truncated length, length past the end,
		// field number 0, end group outside a group, reserved wire types,
		// mismatched end group, a varint of eleven bytes, an overflowing
		// tenth byte, invalid UTF-8 in resource_name.
		{0x80},
		{0x52},
		{0x52, 0x05, 'a'},
		{0x02, 0x00},
		{0x0c},
		{0x0e}, {0x0f},
		{0x0b, 0x14},
		cat([]byte{0x10}, bytes.Repeat([]byte{0xff}, 10), []byte{0x01}),
		cat([]byte{0x10}, bytes.Repeat([]byte{0xff}, 9), []byte{0x02}),
		{0x0a, 0x02, 0xc3, 0x28},
		cat([]byte{0x0a}, varint(1), []byte{0xff}, valid(&bytestream.WriteRequest{ResourceName: "ok"})),
		// A field number just past the largest valid one.
		cat(varint(uint64(1<<29)<<3), []byte{0x00}),
	}
}

func TestWriteRequestSeeds(t *testing.T) {
	// The seeds run as part of FuzzWriteRequestUnmarshal; this checks the
	// malformed ones really are rejected, so the corpus covers error paths.
	codec := NewCodec()
	rejected := 0
	for _, seed := range writeRequestSeeds() {
		if proto.Unmarshal(seed, new(bytestream.WriteRequest)) != nil {
			rejected++
			var m WriteRequest
			if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(seed)}, &m); err == nil {
				t.Errorf("input %x: accepted, proto rejects it", seed)
			}
		}
	}
	if rejected < 12 {
		t.Errorf("only %d malformed seeds; the corpus should cover each error", rejected)
	}
}
