package s3

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cas/tier"
)

// isolateAWS gives the SDK static test credentials from the environment,
// as a user would, and keeps it away from the developer's own AWS files
// and from the EC2 metadata service.
func isolateAWS(t testing.TB, key, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "no-config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "no-credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// node is one cache node: a disk store, a tiered Store over it and a
// bucket, and a reapi.Server on loopback gRPC with the zero-copy options,
// with clients connected to it.
type node struct {
	t     testing.TB
	dir   string
	disk  *disk.Store
	store *tier.Store
	srv   *reapi.Server
	g     *grpc.Server
	conn  *grpc.ClientConn
	pool  *membuf.Pool

	activeReads atomic.Int64 // ByteStream Reads in the handler now

	bs  bspb.ByteStreamClient
	cas repb.ContentAddressableStorageClient
	ac  repb.ActionCacheClient
}

// startNode starts a node on dir (a new one if empty) with cfg, whose
// Location and Dir it fills in if unset. It is stopped when the test ends.
func startNode(t testing.TB, dir string, loc Location, cfg tierOptions) *node {
	t.Helper()
	return startNodeWith(t, dir, loc, cfg)
}

// startNodeWith is startNode with options for its disk store.
func startNodeWith(t testing.TB, dir string, loc Location, cfg tierOptions, opts ...disk.StoreOption) *node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	n := &node{t: t, dir: dir}
	var err error
	n.pool, err = membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	n.disk, err = disk.OpenStore(dir, 0, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Location = loc
	if cfg.Dir == "" {
		cfg.Dir = dir
	}
	if cfg.Pool == nil {
		cfg.Pool = n.pool
	}
	n.store, err = openTier(context.Background(), n.disk, cfg)
	if err != nil {
		n.disk.Close()
		t.Fatal(err)
	}
	n.srv, err = reapi.NewServer(n.store, reapi.Options{Pool: n.pool})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	countReads := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.FullMethod == "/google.bytestream.ByteStream/Read" {
			n.activeReads.Add(1)
			defer n.activeReads.Add(-1)
		}
		return handler(srv, ss)
	}
	n.g = grpc.NewServer(append(reapi.ServerOptions(n.pool), grpc.ChainStreamInterceptor(countReads))...)
	n.srv.Register(n.g)
	go n.g.Serve(lis)
	n.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	n.bs = bspb.NewByteStreamClient(n.conn)
	n.cas = repb.NewContentAddressableStorageClient(n.conn)
	n.ac = repb.NewActionCacheClient(n.conn)
	t.Cleanup(n.stop)
	return n
}

// stop stops the node, as a graceful shutdown does; the uploads not done
// stay in the journal.
func (n *node) stop() {
	if n.conn == nil {
		return
	}
	n.conn.Close()
	n.g.Stop()
	n.srv.Close()
	if err := n.store.Close(); err != nil {
		n.t.Errorf("closing the tiered store: %v", err)
	}
	n.disk.Close()
	n.conn = nil
}

// blobOf returns n bytes that differ with seed.
func blobOf(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) + seed
	}
	return b
}

func readName(d cas.Digest) string { return fmt.Sprintf("blobs/%s/%d", d.Hash, d.Size) }

// read reads [off, off+limit) of d through ByteStream and returns what
// arrived, and the error the stream ended with.
func (n *node) read(ctx context.Context, d cas.Digest, off, limit int64) ([]byte, error) {
	return n.readResource(ctx, readName(d), off, limit)
}

// readZstd reads all of d through a compressed-blobs/zstd name and returns
// it decompressed.
func (n *node) readZstd(ctx context.Context, d cas.Digest) ([]byte, error) {
	z, err := n.readResource(ctx, fmt.Sprintf("compressed-blobs/zstd/%s/%d", d.Hash, d.Size), 0, 0)
	if err != nil {
		return nil, err
	}
	return zstdDecoder.DecodeAll(z, nil)
}

// zstdDecoder and zstdEncoder are a client's coders (EncodeAll and
// DecodeAll are safe for concurrent use).
var (
	zstdDecoder, _ = zstd.NewReader(nil)
	zstdEncoder, _ = zstd.NewWriter(nil)
)

// readResource reads [off, off+limit) of the resource name.
func (n *node) readResource(ctx context.Context, name string, off, limit int64) ([]byte, error) {
	stream, err := n.bs.Read(ctx, &bspb.ReadRequest{ResourceName: name, ReadOffset: off, ReadLimit: limit})
	if err != nil {
		return nil, err
	}
	var got []byte
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, resp.Data...)
	}
}

// write uploads data through ByteStream in 64 KiB messages.
func (n *node) write(ctx context.Context, data []byte) (cas.Digest, error) {
	d := cas.DigestOf(data)
	return d, n.writeResource(ctx, fmt.Sprintf("uploads/u-%s/blobs/%s/%d", d.Hash[:8], d.Hash, d.Size), data, d.Size)
}

// writeZstd uploads plain zstd-compressed, through a compressed-blobs
// name: a node keeps such a blob compressed (disk's default policy). The
// committed size is the compressed bytes, or -1 for a blob the server had
// (the REAPI's rule for compressed uploads).
func (n *node) writeZstd(ctx context.Context, plain []byte) (cas.Digest, error) {
	d := cas.DigestOf(plain)
	z := zstdEncoder.EncodeAll(plain, nil)
	return d, n.writeResource(ctx, fmt.Sprintf("uploads/u-%s/compressed-blobs/zstd/%s/%d", d.Hash[:8], d.Hash, d.Size), z, int64(len(z)), -1)
}

// writeResource uploads data under the resource name in 64 KiB messages
// and checks that the committed size the server answers is one of want.
func (n *node) writeResource(ctx context.Context, name string, data []byte, want ...int64) error {
	stream, err := n.bs.Write(ctx)
	if err != nil {
		return err
	}
	for off := 0; ; {
		end := min(off+64<<10, len(data))
		req := &bspb.WriteRequest{WriteOffset: int64(off), Data: data[off:end], FinishWrite: end == len(data)}
		if off == 0 {
			req.ResourceName = name
		}
		if err := stream.Send(req); err != nil {
			break // the server answered; CloseAndRecv says how
		}
		off = end
		if req.FinishWrite {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return err
	}
	if !slices.Contains(want, resp.CommittedSize) {
		return fmt.Errorf("committed %d of %d bytes", resp.CommittedSize, len(data))
	}
	return nil
}

// mustRead reads all of d and fails the test unless it is want.
func (n *node) mustRead(d cas.Digest, want []byte) {
	n.t.Helper()
	got, err := n.read(context.Background(), d, 0, 0)
	if err != nil || !bytes.Equal(got, want) {
		n.t.Fatalf("reading %s: %d bytes, %v; want the %d bytes written", d, len(got), err, len(want))
	}
}

// onDisk reports whether d is committed in the node's disk tier.
func (n *node) onDisk(d cas.Digest) bool {
	ok, _ := cas.Contains(context.Background(), n.disk, d)
	return ok
}

// tmpFiles lists the disk store's temporary files (uploads and fills in
// progress, or left behind).
func (n *node) tmpFiles() []string {
	ents, err := os.ReadDir(filepath.Join(n.dir, "tmp"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		n.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// tierOptions configures a node's tier in these tests: the bucket, and the
// tier machinery's settings (openTier sets their Backend and Name).
type tierOptions struct {
	Location Location
	// LookupConcurrency is how many HEADs one FindMissing sends at once,
	// and how many objects of one batch upload at once; 0 means 32.
	LookupConcurrency int
	tier.Config
}

// openTier returns the tier of local in front of cfg.Location's bucket, as
// membuf serve --upstream s3://... makes it.
func openTier(ctx context.Context, local tier.Local, cfg tierOptions) (*tier.Store, error) {
	b, err := New(ctx, Config{Location: cfg.Location, Concurrency: max(cmp.Or(cfg.LookupConcurrency, 32), cfg.UploadWorkers), RequestTimeout: cmp.Or(cfg.RequestTimeout, 30*time.Second)})
	if err != nil {
		return nil, err
	}
	cfg.Config.Backend = b
	cfg.Config.Name = "s3"
	return tier.Open(ctx, local, cfg.Config)
}
