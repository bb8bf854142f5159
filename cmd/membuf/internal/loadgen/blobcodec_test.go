package loadgen

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// split cuts b into up to three buffers at i and j (taken modulo len(b)+1),
// the way gRPC may hand a message over in pieces.
func split(b []byte, i, j uint16) mem.BufferSlice {
	n := len(b) + 1
	a, c := int(i)%n, int(j)%n
	if a > c {
		a, c = c, a
	}
	return mem.BufferSlice{mem.SliceBuffer(b[:a]), mem.SliceBuffer(b[a:c]), mem.SliceBuffer(b[c:])}
}

// hasGroup reports whether b holds a field of the group wire types at its
// top level, which readChunk rejects and proto skips as unknown.
func hasGroup(b []byte) bool {
	for len(b) > 0 {
		_, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		if typ == protowire.StartGroupType || typ == protowire.EndGroupType {
			return true
		}
		m := protowire.ConsumeFieldValue(0, typ, b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
	}
	return false
}

// FuzzReadChunk checks the client's ReadResponse parser against
// google.golang.org/protobuf: the same data length whenever both accept,
// acceptance of everything proto accepts (groups aside), and never a
// panic.
func FuzzReadChunk(f *testing.F) {
	for _, m := range []*bspb.ReadResponse{{}, {Data: []byte("x")}, {Data: bytes.Repeat([]byte{7}, 300)}} {
		b, _ := proto.Marshal(m)
		f.Add(b, uint16(1), uint16(3))
	}
	f.Add([]byte{0x52, 0x80}, uint16(1), uint16(2))                      // truncated length
	f.Add([]byte{0x52, 0x05, 1, 2}, uint16(0), uint16(0))                // data runs past the end
	f.Add([]byte{0x08, 0x96, 0x01, 0x52, 0x01, 9}, uint16(2), uint16(5)) // an unknown varint field first
	f.Fuzz(func(t *testing.T, b []byte, i, j uint16) {
		var got readChunk
		err := got.unmarshal(split(b, i, j))
		var want bspb.ReadResponse
		perr := proto.Unmarshal(b, &want)
		switch {
		case perr == nil && err == nil:
			if got.N != int64(len(want.Data)) {
				t.Fatalf("%x: data length %d, proto says %d", b, got.N, len(want.Data))
			}
		case perr == nil && !hasGroup(b):
			t.Fatalf("%x: proto accepts it, readChunk says %v", b, err)
		}
	})
}

// FuzzWriteChunk checks that what the client sends is a WriteRequest that
// google.golang.org/protobuf reads back field for field.
func FuzzWriteChunk(f *testing.F) {
	f.Add("uploads/u/blobs/h/3", int64(0), false, []byte("abc"))
	f.Add("", int64(1<<40), true, []byte{})
	f.Fuzz(func(t *testing.T, name string, off int64, finish bool, data []byte) {
		if off < 0 {
			off = -off
		}
		// The data field goes out in two pieces (Data, Tail) split at a
		// point drawn from the input, as the last message of a write does.
		cut := 0
		if len(data) > 0 {
			cut = int(off % int64(len(data)+1))
		}
		m := writeChunk{ResourceName: name, WriteOffset: off, FinishWrite: finish, Data: data[:cut], Tail: data[cut:]}
		wire := m.marshal().Materialize()
		var got bspb.WriteRequest
		if err := proto.Unmarshal(wire, &got); err != nil {
			if !utf8.ValidString(name) {
				return // proto refuses a string field that is not UTF-8; so would a server
			}
			t.Fatalf("%+v: proto cannot read it: %v", m, err)
		}
		if got.ResourceName != name || got.WriteOffset != off || got.FinishWrite != finish || !bytes.Equal(got.Data, data) {
			t.Fatalf("sent %+v, proto read %+v", m, &got)
		}
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&bspb.WriteRequest{ResourceName: name, WriteOffset: off, FinishWrite: finish, Data: data})
		if !bytes.Equal(wire, want) {
			t.Fatalf("sent %x, proto marshals %x", wire, want)
		}
	})
}

// The blobs workload refuses to dial anything but loopback, whatever the
// address it was given resolved to; nothing is sent to the refused ones.
func TestDialLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:80", "192.0.2.1:8980", "[2001:db8::1]:8980", "example.invalid:80"} {
		if c, err := dialLoopback(context.Background(), addr); err == nil {
			c.Close()
			t.Errorf("dialLoopback(%q) connected; want a refusal", addr)
		} else if !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("dialLoopback(%q): %v; want a refusal naming loopback", addr, err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := dialLoopback(context.Background(), lis.Addr().String())
	if err != nil {
		t.Fatalf("dialLoopback(%s): %v", lis.Addr(), err)
	}
	c.Close()
}
