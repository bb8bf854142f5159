// Package blobclient is the ByteStream client every blob workload of
// `membuf bench` drives a server with ([Client]: loopback only, no copy of
// the payload of its own), and the blobs it sends ([Set]: a shared base
// and a 16-byte stamp each, so that a blob's digest costs a hash of 16
// bytes and any blob can be made again from its size and number).
package blobclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
)

// A Client reads and writes blobs over ByteStream the way every workload
// here does: with grpcmem's codec, received data as references into the
// frames gRPC read (counted, then freed), sent data by reference from the
// caller's buffers. It copies no payload of its own.
type Client struct {
	// Conns are the connections, each its own transport; a caller
	// spreads its streams over them.
	Conns []*grpc.ClientConn
	// Instance is the REAPI instance name that prefixes resource names.
	Instance string
	// Chunk is the most data one WriteRequest carries.
	Chunk int
}

// MaxChunkSize is the most data a ByteStream message carries here: under
// grpc-go's default 4 MiB receive limit, with space to spare.
const MaxChunkSize = 2 << 20

var (
	readDesc  = grpc.StreamDesc{StreamName: "Read", ServerStreams: true}
	writeDesc = grpc.StreamDesc{StreamName: "Write", ClientStreams: true}
)

// The ByteStream methods' full names, as an interceptor sees them.
const (
	MethodRead  = "/google.bytestream.ByteStream/Read"
	MethodWrite = "/google.bytestream.ByteStream/Write"
)

// Dial returns a client of n connections to addr (loopback only): each
// grpc.ClientConn has a transport, so a TCP connection, of its own. Its
// transports take their buffers from pool.
func Dial(addr string, pool mem.BufferPool, n int, instance string, chunk int) (*Client, error) {
	var conns []*grpc.ClientConn
	for range n {
		c, err := grpc.NewClient(addr,
			grpc.WithContextDialer(DialLoopback),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			experimental.WithBufferPool(pool),
			grpc.WithDefaultCallOptions(grpcmem.CallOption()),
		)
		if err != nil {
			closeAll(conns)
			return nil, err
		}
		conns = append(conns, c)
	}
	return &Client{Conns: conns, Instance: instance, Chunk: chunk}, nil
}

// Close closes the client's connections.
func (c *Client) Close() { closeAll(c.Conns) }

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// DialLoopback dials only loopback addresses: a workload sends traffic
// nowhere else, whatever the name it was given resolves to.
func DialLoopback(ctx context.Context, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("bench: refusing to dial %s: not a loopback address", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Read reads a whole blob over conn and checks its length, unless size is
// -1.
func (c *Client) Read(ctx context.Context, conn *grpc.ClientConn, name string, size int64) error {
	// No context of its own: gRPC cancels the stream's when it finishes, and
	// every return below follows a finishing error or io.EOF.
	stream, err := conn.NewStream(ctx, &readDesc, MethodRead)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&bspb.ReadRequest{ResourceName: name}); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	var got int64
	var chunk grpcmem.ClientReadResponse
	for {
		err := stream.RecvMsg(&chunk)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		got += int64(chunk.Data.Len())
		chunk.Free()
	}
	if size >= 0 && got != size || got == 0 {
		return fmt.Errorf("read %s: got %d bytes, want %d", name, got, size)
	}
	return nil
}

// Write uploads the blob base[:PrefixLen(size)] + stamp under name over
// conn, in messages of at most c.Chunk bytes (the stamp shares the last
// message with the end of the prefix, as one data field), and checks the
// committed size.
func (c *Client) Write(ctx context.Context, conn *grpc.ClientConn, name string, base []byte, size int64, stamp *[StampLen]byte) error {
	plen := PrefixLen(size)
	committed, err := c.Upload(ctx, conn, name, base[:plen], stamp[:size-plen])
	if err != nil {
		return err
	}
	if committed != size {
		return fmt.Errorf("write %s: committed %d bytes, want %d", name, committed, size)
	}
	return nil
}

// Upload sends the bytes of head and then tail as one ByteStream Write to
// name over conn, in messages of at most c.Chunk bytes that refer to them
// (no copy), and returns the committed size the server answers.
func (c *Client) Upload(ctx context.Context, conn *grpc.ClientConn, name string, head, tail []byte) (int64, error) {
	stream, err := conn.NewStream(ctx, &writeDesc, MethodWrite)
	if err != nil {
		return 0, err
	}
	hlen := int64(len(head))
	total := hlen + int64(len(tail))
	var data membuf.Slice // its backing array serves every message: Marshal empties it
	for off := int64(0); off < total; {
		end := min(total, off+int64(c.Chunk))
		// A new message per send: gRPC may hold the last one's header.
		msg := &grpcmem.WriteRequest{WriteOffset: off, FinishWrite: end == total, Data: data[:0]}
		if off == 0 {
			msg.ResourceName = name
		}
		if off < hlen {
			msg.Data = append(msg.Data, membuf.Wrap(head[off:min(end, hlen)]))
		}
		if end > hlen {
			msg.Data = append(msg.Data, membuf.Wrap(tail[max(off, hlen)-hlen:end-hlen]))
		}
		data = msg.Data
		off = end
		if err := grpcmem.SendWrite(stream, msg); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server has answered already; RecvMsg says how
			}
			return 0, err
		}
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	var resp bspb.WriteResponse
	if err := stream.RecvMsg(&resp); err != nil {
		return 0, err
	}
	return resp.CommittedSize, nil
}

// StallUpload starts uploading the blob base[:size] under name, sends its
// first message (at most c.Chunk bytes, not finishing it unless the blob is
// that short), holds the stream for stall, and abandons it. It returns the
// bytes sent.
func (c *Client) StallUpload(ctx context.Context, conn *grpc.ClientConn, name string, base []byte, size int64, stall time.Duration) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // abandons the upload
	stream, err := conn.NewStream(ctx, &writeDesc, MethodWrite)
	if err != nil {
		return 0, err
	}
	n := min(size-1, int64(c.Chunk), PrefixLen(size))
	msg := &grpcmem.WriteRequest{ResourceName: name, Data: membuf.Slice{membuf.Wrap(base[:n])}}
	if err := grpcmem.SendWrite(stream, msg); err != nil {
		return 0, err
	}
	t := time.NewTimer(stall)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return n, nil
}
