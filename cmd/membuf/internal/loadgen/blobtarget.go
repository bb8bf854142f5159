package loadgen

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/grpcmem"
)

// blobTarget is one configuration of the blobs workload: client
// connections and, in process, the server they talk to.
type blobTarget struct {
	target
	conns    []*grpc.ClientConn
	http     *http.Client // for the HTTP modes
	httpBase string       // http://host:port of the server's HTTP cache; "": none
	stall    time.Duration
	instance string
	chunk    int
	sets     map[Case]*blobSet
}

var (
	readDesc  = grpc.StreamDesc{StreamName: "Read", ServerStreams: true}
	writeDesc = grpc.StreamDesc{StreamName: "Write", ClientStreams: true}
)

const (
	methodRead  = "/google.bytestream.ByteStream/Read"
	methodWrite = "/google.bytestream.ByteStream/Write"
)

// dialBlobs makes n client connections to addr: each grpc.ClientConn has a
// transport, so a TCP connection, of its own.
func dialBlobs(addr string, pool mem.BufferPool, n int) ([]*grpc.ClientConn, error) {
	var conns []*grpc.ClientConn
	for range n {
		c, err := grpc.NewClient(addr,
			grpc.WithContextDialer(dialLoopback),
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
	return conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// dialLoopback dials only loopback addresses: the workload sends traffic
// nowhere else, whatever the name it was given resolves to.
func dialLoopback(ctx context.Context, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("loadgen: refusing to dial %s: not a loopback address", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func newBlobTarget(name string, conns []*grpc.ClientConn, s *blobServer, instance string, chunk int, sets map[Case]*blobSet) *blobTarget {
	bt := &blobTarget{conns: conns, http: newHTTPClient(), instance: instance, chunk: chunk, sets: sets}
	bt.target = target{name: name, worker: bt.worker, measureGC: true}
	if s != nil {
		bt.serverOps = s.completed.Load
	}
	return bt
}

func (bt *blobTarget) worker(ctx context.Context, c Case, w int) (op, func(), error) {
	set := bt.sets[c]
	if set == nil {
		return nil, nil, fmt.Errorf("no blobs for case %s", c)
	}
	// Worker w of a case of C streams uses connection w mod n: min(C, n)
	// connections, each carrying an equal share of the streams.
	conn := bt.conns[w%len(bt.conns)]
	if httpMode(c.Mode) {
		return bt.httpWorker(c, set, w)
	}
	switch c.Mode {
	case ModeRead, ModeReadZstd:
		names := make([]string, len(set.reads))
		for i, ref := range set.reads {
			names[i] = withInstance(bt.instance, ref.digestName)
		}
		// Workers start at different blobs, so that they do not all read
		// the same one at once.
		start := int64(w) * 7
		return func(ctx context.Context, seq int64) (int64, error) {
			i := (start + seq) % int64(len(names))
			size := set.reads[i].size
			want := size
			if set.zstd {
				want = -1 // a zstd stream: its length is the server's choice
			}
			return size, bt.read(ctx, conn, names[i], want)
		}, func() {}, nil
	case ModeStall:
		h := sha256.New()
		var stamp [stampLen]byte
		stall := bt.stall
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.sizes[seq%int64(len(set.sizes))]
			stamp = set.stamp(uint64(seq))
			name := uploadName(bt.instance, uint64(seq), "blobs/"+set.digest(h, size, &stamp)+"/"+strconv.FormatInt(size, 10))
			return bt.stallUpload(ctx, conn, name, set.base, size, stall)
		}, func() {}, nil
	case ModeWrite, ModeWriteZstd:
		h := sha256.New()
		var stamp [stampLen]byte
		var frame []byte
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.sizes[seq%int64(len(set.sizes))]
			// seq is unique in the run and below 1<<63.
			stamp = set.stamp(uint64(seq))
			name := uploadName(bt.instance, uint64(seq), set.namePrefix()+set.digest(h, size, &stamp)+"/"+strconv.FormatInt(size, 10))
			if set.zstd {
				frame = stampFrame(frame[:0], &stamp, size)
				return size, bt.writeZstd(ctx, conn, name, set.zprefix[prefixLen(size)], frame)
			}
			return size, bt.write(ctx, conn, name, set.base, size, &stamp)
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown blobs mode %q", c.Mode)
}

// read reads a whole blob and checks its length, unless size is -1.
func (bt *blobTarget) read(ctx context.Context, conn *grpc.ClientConn, name string, size int64) error {
	// No context of its own: gRPC cancels the stream's when it finishes, and
	// every return below follows a finishing error or io.EOF.
	stream, err := conn.NewStream(ctx, &readDesc, methodRead)
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

// write uploads the blob base[:prefixLen(size)] + stamp under name, in
// messages of at most bt.chunk bytes (the stamp shares the last message with
// the end of the prefix, as one data field), and checks the committed size.
func (bt *blobTarget) write(ctx context.Context, conn *grpc.ClientConn, name string, base []byte, size int64, stamp *[stampLen]byte) error {
	plen := prefixLen(size)
	committed, err := bt.upload(ctx, conn, name, base[:plen], stamp[:size-plen])
	if err != nil {
		return err
	}
	if committed != size {
		return fmt.Errorf("write %s: committed %d bytes, want %d", name, committed, size)
	}
	return nil
}

// upload sends the bytes of head and then tail as one ByteStream Write to
// name, in messages of at most bt.chunk bytes that refer to them (no
// copy), and returns the committed size the server answers.
func (bt *blobTarget) upload(ctx context.Context, conn *grpc.ClientConn, name string, head, tail []byte) (int64, error) {
	stream, err := conn.NewStream(ctx, &writeDesc, methodWrite)
	if err != nil {
		return 0, err
	}
	hlen := int64(len(head))
	total := hlen + int64(len(tail))
	var data membuf.Slice // its backing array serves every message: Marshal empties it
	for off := int64(0); off < total; {
		end := min(total, off+int64(bt.chunk))
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

// stallUpload starts uploading the blob base[:size] under name, sends its
// first message (at most bt.chunk bytes, not finishing it unless the blob is
// that short), holds the stream for stall, and abandons it. It returns the
// bytes sent.
func (bt *blobTarget) stallUpload(ctx context.Context, conn *grpc.ClientConn, name string, base []byte, size int64, stall time.Duration) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // abandons the upload
	stream, err := conn.NewStream(ctx, &writeDesc, methodWrite)
	if err != nil {
		return 0, err
	}
	n := min(size-1, int64(bt.chunk), prefixLen(size))
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
