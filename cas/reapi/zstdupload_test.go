package reapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/reapi/internal/upload"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/internal/await"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func zstdReadName(d cas.Digest) string { return "inst/compressed-blobs/zstd/" + d.String() }

func zstdWriteName(uuid string, d cas.Digest) string {
	return "inst/uploads/" + uuid + "/compressed-blobs/zstd/" + d.String()
}

// readZstdName reads name (a compressed-blobs name) from off and returns
// what the stream decompresses to.
func (e *testEnv) readZstdName(name string, off int64) ([]byte, error) {
	e.t.Helper()
	got, _, err := e.read(name, off, 0)
	if err != nil {
		return nil, err
	}
	return testblob.Decompress(e.t, got), nil
}

// TestZstdWriteThenRead: blobs uploaded compressed (by a stream encoder and
// in one frame, with several windows) are stored, kept compressed if they
// compress, and read back both ways from any offset; a finished compressed
// upload's committed_size is the compressed bytes received.
func TestZstdWriteThenRead(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	cases := []struct {
		name       string
		data       []byte
		compress   func([]byte) []byte
		compressed bool // kept compressed on disk
	}{
		{"1 KiB text, one frame", testblob.Text(1<<10, 1), testblob.Compress, true},
		{"700 KiB text, streamed", testblob.Text(700<<10, 2), func(b []byte) []byte { return testblob.CompressStream(t, b, 1<<20) }, true},
		{"300 KiB text, small window", testblob.Text(300<<10, 3), func(b []byte) []byte { return testblob.CompressStream(t, b, 64<<10) }, true},
		{"600 KiB random", testblob.Random(600<<10, 101), testblob.Compress, false},
	}
	for i, c := range cases {
		d := cas.DigestOf(c.data)
		z := c.compress(c.data)
		before := e.store.Stats().CompressedBlobs
		committed, err := e.write(zstdWriteName("u", d), z, 64<<10)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if committed != int64(len(z)) {
			t.Fatalf("%s: committed_size %d, want the %d compressed bytes sent", c.name, committed, len(z))
		}
		if got := e.store.Stats().CompressedBlobs - before; got != map[bool]int64{true: 1}[c.compressed] {
			t.Fatalf("%s: %d more blobs kept compressed, want compressed=%v", c.name, got, c.compressed)
		}
		if got, _, err := e.read(readName(d), 0, 0); err != nil || !bytes.Equal(got, c.data) {
			t.Fatalf("%s: plain read: %v", c.name, err)
		}
		n := int64(len(c.data))
		for _, off := range []int64{0, 1, zstdseek.FrameSize, zstdseek.FrameSize + 7, n - 1, n} {
			if off > n {
				continue
			}
			got, err := e.readZstdName(zstdReadName(d), off)
			if err != nil || !bytes.Equal(got, c.data[off:]) {
				t.Fatalf("case %d, %s: compressed read from %d: %d bytes, %v", i, c.name, off, len(got), err)
			}
		}
		// Uploading it again finds it stored: committed_size -1.
		if committed, err := e.write(zstdWriteName("again", d), z, 64<<10); err != nil || committed != -1 {
			t.Fatalf("%s: a second compressed upload: %d, %v; want -1", c.name, committed, err)
		}
		q, err := e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: zstdWriteName("u", d)})
		if err != nil || !q.Complete {
			t.Fatalf("%s: QueryWriteStatus: %v, %v", c.name, q, err)
		}
	}
	// A blob uploaded plain reads compressed too (compressed as it is read),
	// and the empty blob reads as an empty stream.
	data := testblob.Text(400<<10, 4)
	d := e.put(data)
	for _, off := range []int64{0, 123_456, int64(len(data))} {
		if got, err := e.readZstdName(zstdReadName(d), off); err != nil || !bytes.Equal(got, data[off:]) {
			t.Fatalf("compressed read of a plain blob from %d: %v", off, err)
		}
	}
	empty := cas.DigestOf(nil)
	if got, err := e.readZstdName(zstdReadName(empty), 0); err != nil || len(got) != 0 {
		t.Fatalf("compressed read of the empty blob: %q, %v", got, err)
	}
	if committed, err := e.write(zstdWriteName("e", empty), testblob.Compress(nil), 10); err != nil || committed != -1 {
		t.Fatalf("compressed upload of the empty blob: %d, %v; want -1 (always present)", committed, err)
	}
}

// TestZstdReadArguments: read_limit must be 0 on a compressed read; offsets
// are checked as for plain reads.
func TestZstdReadArguments(t *testing.T) {
	e := newEnv(t, 0, Options{})
	d := e.put(testblob.Text(1000, 5))
	_, _, err := e.read(zstdReadName(d), 0, 10)
	wantCode(t, err, codes.InvalidArgument, "read_limit 10 on a compressed read")
	_, _, err = e.read(zstdReadName(d), 1001, 0)
	wantCode(t, err, codes.OutOfRange, "past the end")
	_, _, err = e.read(zstdReadName(d), -1, 0)
	wantCode(t, err, codes.OutOfRange, "negative")
	_, _, err = e.read(zstdReadName(cas.Digest{Hash: d.Hash, Size: 999}), 0, 0)
	wantCode(t, err, codes.NotFound, "")
}

// TestZstdWriteBadStreams: a compressed upload whose content does not match
// its digest, or whose stream is not zstd, is cut short, or expands past its
// declared size, is INVALID_ARGUMENT and leaves nothing behind.
func TestZstdWriteBadStreams(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Text(500<<10, 6)
	d := cas.DigestOf(data)
	z := testblob.CompressStream(t, data, 1<<20)
	other := testblob.Text(500<<10, 7)
	bomb := testblob.CompressStream(t, make([]byte, 64<<20), 1<<20)
	cases := []struct {
		name   string
		d      cas.Digest
		stream []byte
		want   string
	}{
		{"wrong hash", cas.Digest{Hash: cas.DigestOf(other).Hash, Size: d.Size}, z, "hashes to"},
		{"wrong size, short", cas.Digest{Hash: d.Hash, Size: d.Size + 1}, z, "received"},
		{"wrong size, long", cas.Digest{Hash: d.Hash, Size: d.Size - 1}, z, "more than the"},
		{"truncated", d, z[:len(z)/2], "cut short"},
		{"truncated in the header", d, z[:3], "not a zstd stream"},
		{"not zstd", d, data[:1000], "not a zstd stream"},
		{"trailing garbage", d, append(bytes.Clone(z), "garbage"...), "not a valid zstd stream"},
		{"bomb", cas.Digest{Hash: d.Hash, Size: 1 << 20}, bomb, "more than the 1048576 bytes"},
		{"no data", d, nil, "not a zstd stream"},
	}
	for _, c := range cases {
		_, err := e.write(zstdWriteName("bad", c.d), c.stream, 32<<10)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v, want INVALID_ARGUMENT", c.name, err)
		}
		if msg := status.Convert(err).Message(); !bytes.Contains([]byte(msg), []byte(c.want)) {
			t.Fatalf("%s: %q, want it to say %q", c.name, msg, c.want)
		}
		if ok, _ := cas.Contains(context.Background(), e.store, c.d); ok {
			t.Fatalf("%s: the blob was stored", c.name)
		}
		await.True(t, c.name+": the upload's temporary file to go", func() bool { return len(disktest.TmpFiles(t, e.dir)) == 0 })
	}
	if st := e.store.Stats(); st.Blobs != 0 || st.PartialBytes != 0 {
		t.Fatalf("left behind: %+v", st)
	}
}

// TestZstdBombStopsAtDeclaredSize: decompression stops within a block of
// the declared size, whatever the stream would expand to.
func TestZstdBombStopsAtDeclaredSize(t *testing.T) {
	p, err := zstdseek.NewPool(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	bomb := testblob.CompressStream(t, make([]byte, 256<<20), 8<<20)
	s := openTestStore(t, t.TempDir(), 0, disk.WithCompression(disk.Compression{Policy: disk.CompressNone}))
	w, err := s.NewWriter(context.Background(), cas.Digest{Hash: cas.EmptyHash, Size: 1 << 20}, cas.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	attempted := &attemptCounter{w: upload.NewDeclaredSizeWriter(w, 1<<20)}
	_, err = p.DecodeStream(context.Background(), 8<<20, bytes.NewReader(bomb), attempted)
	if !errors.Is(err, upload.ErrPastDeclared) {
		t.Fatalf("decoding a bomb: %v, want errPastDeclared", err)
	}
	// The decoder may run past the declared size by at most one block (zstd's largest is 128 KiB).
	if attempted.n > 1<<20+128<<10 || w.Written() > 1<<20 {
		t.Fatalf("the decoder produced %d bytes (%d written) of a 1 MiB declared size", attempted.n, w.Written())
	}
}

// attemptCounter counts the bytes offered to w, accepted or not.
type attemptCounter struct {
	w io.Writer
	n int64
}

func (a *attemptCounter) Write(p []byte) (int, error) {
	a.n += int64(len(p))
	return a.w.Write(p)
}

// TestZstdWriteProtocol: the offsets of a compressed upload, what may not
// follow finish_write, windows too large, streams ended early (not kept:
// compressed uploads do not resume).
func TestZstdWriteProtocol(t *testing.T) {
	e := newEnv(t, 0, Options{})
	data := testblob.Text(200<<10, 8)
	d := cas.DigestOf(data)
	z := testblob.CompressStream(t, data, 1<<20)
	name := zstdWriteName("p", d)

	_, err := e.sendRaw(&bspb.WriteRequest{ResourceName: name, WriteOffset: 5, Data: z, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "start at 0")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: z[:100]},
		&bspb.WriteRequest{WriteOffset: 99, Data: z[100:], FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "write_offset 99, expected 100")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: z[:100]},
		&bspb.WriteRequest{ResourceName: zstdWriteName("other", d), WriteOffset: 100, Data: z[100:], FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "differs")
	_, err = e.sendRaw(
		&bspb.WriteRequest{ResourceName: name, Data: z, FinishWrite: true},
		&bspb.WriteRequest{WriteOffset: int64(len(z))})
	wantCode(t, err, codes.InvalidArgument, "followed the one with finish_write")
	// A frame header asking for a 16 MiB window.
	big := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 14 << 3, 0x01, 0x00, 0x00}
	_, err = e.sendRaw(&bspb.WriteRequest{ResourceName: name, Data: big, FinishWrite: true})
	wantCode(t, err, codes.InvalidArgument, "window of 16777216 bytes")
	// Ended without finish_write: committed_size 0, nothing kept.
	resp, err := e.sendRaw(&bspb.WriteRequest{ResourceName: name, Data: z[:len(z)/2]})
	if err != nil || resp.CommittedSize != 0 {
		t.Fatalf("an upload ended early: %v, %v; want committed_size 0", resp, err)
	}
	_, err = e.bs.QueryWriteStatus(context.Background(), &bspb.QueryWriteStatusRequest{ResourceName: name})
	wantCode(t, err, codes.NotFound, "")
	// The same stream, whole, in one-byte requests.
	if committed, err := e.write(name, z, 1); err != nil || committed != int64(len(z)) {
		t.Fatalf("in one-byte requests: %d, %v", committed, err)
	}
	if len(disktest.TmpFiles(t, e.dir)) != 0 || e.store.Stats().PartialBytes != 0 {
		t.Fatal("an upload left a temporary file or reserved bytes")
	}
}

// TestZstdUploadWaitsForMemory: with the zstd budget spent, a compressed
// upload waits for a decoder and gives up at its own deadline, counted.
func TestZstdUploadWaitsForMemory(t *testing.T) {
	// A budget of one decoder: the reserve NewPool keeps for frame coders
	// still lets the first upload's decoder through (one request of a
	// class gets through when nothing else of it is lent), not a second.
	zp, err := zstdseek.NewPool(zstdseek.StreamDecoderCharge(1 << 20))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 0, Options{Zstd: zp})
	data := testblob.Text(300<<10, 9)
	d := cas.DigestOf(data)
	z := testblob.CompressStream(t, data, 1<<20)

	// The first upload sends half its stream and holds its decoder.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := e.bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Send(&bspb.WriteRequest{ResourceName: zstdWriteName("a", d), Data: z[:len(z)/2]}); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the first upload's decoder to be lent", func() bool { return zp.Stats().LongBytes > 0 })

	// The second waits, and its deadline ends the wait.
	short, cancelShort := context.WithTimeout(context.Background(), time.Second)
	defer cancelShort()
	second, err := e.bs.Write(short)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Send(&bspb.WriteRequest{ResourceName: zstdWriteName("b", d), Data: z, FinishWrite: true}); err != nil {
		t.Fatal(err)
	}
	_, err = second.CloseAndRecv()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the waiting upload: %v, want DEADLINE_EXCEEDED", err)
	}
	await.True(t, "the wait to be counted", func() bool { st := zp.Stats(); return st.Timeouts == 1 && st.Waiting == 0 })

	// The first finishes.
	if err := first.Send(&bspb.WriteRequest{WriteOffset: int64(len(z) / 2), Data: z[len(z)/2:], FinishWrite: true}); err != nil {
		t.Fatal(err)
	}
	if resp, err := first.CloseAndRecv(); err != nil || resp.CommittedSize != int64(len(z)) {
		t.Fatalf("the first upload: %v, %v", resp, err)
	}
	if got, _, err := e.read(readName(d), 0, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading it back: %v", err)
	}
}

// TestZstdBatches: BatchUpdateBlobs takes zstd entries (each checked on its
// own: bombs, garbage, mismatches), and BatchReadBlobs answers zstd, with
// the stored frames, for blobs kept compressed when the request accepts it.
func TestZstdBatches(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	text := testblob.Text(100<<10, 10)
	random := testblob.Random(50<<10, 102)
	bad := testblob.Text(1000, 11)
	req := &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: cas.DigestOf(text).Proto(), Data: testblob.Compress(text), Compressor: repb.Compressor_ZSTD},
		{Digest: cas.DigestOf(random).Proto(), Data: testblob.Compress(random), Compressor: repb.Compressor_ZSTD},
		{Digest: (&cas.Digest{Hash: cas.DigestOf(bad).Hash, Size: 500}).Proto(), Data: testblob.Compress(bad), Compressor: repb.Compressor_ZSTD},
		{Digest: cas.DigestOf(bad).Proto(), Data: []byte("not zstd"), Compressor: repb.Compressor_ZSTD},
		{Digest: cas.DigestOf(bad).Proto(), Data: testblob.Compress(text[:1000]), Compressor: repb.Compressor_ZSTD},
		{Digest: cas.DigestOf(bad).Proto(), Data: bad, Compressor: repb.Compressor_DEFLATE},
	}}
	resp, err := e.cas.BatchUpdateBlobs(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		code codes.Code
		msg  string
	}{{codes.OK, ""}, {codes.OK, ""}, {codes.InvalidArgument, "more than the 500 bytes"}, {codes.InvalidArgument, "not a valid zstd stream"},
		{codes.InvalidArgument, "hashes to"}, {codes.InvalidArgument, "zstd only"}}
	for i, w := range want {
		st := resp.Responses[i].Status
		if codes.Code(st.Code) != w.code || !bytes.Contains([]byte(st.Message), []byte(w.msg)) {
			t.Fatalf("blob %d: %v, want %v %q", i, st, w.code, w.msg)
		}
	}
	if st := e.store.Stats(); st.Blobs != 2 || st.CompressedBlobs != 1 {
		t.Fatalf("%+v: want both good blobs, the text one kept compressed", st)
	}
	// A batch is limited by the sizes its compressed blobs declare.
	over := &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: (&cas.Digest{Hash: cas.DigestOf(bad).Hash, Size: DefaultMaxBatchBytes + 1}).Proto(), Data: testblob.Compress(bad), Compressor: repb.Compressor_ZSTD},
	}}
	_, err = e.cas.BatchUpdateBlobs(context.Background(), over)
	wantCode(t, err, codes.InvalidArgument, "compressed ones counted uncompressed")

	read := func(accept ...repb.Compressor_Value) *repb.BatchReadBlobsResponse {
		t.Helper()
		resp, err := e.cas.BatchReadBlobs(context.Background(), &repb.BatchReadBlobsRequest{
			Digests:               []*repb.Digest{cas.DigestOf(text).Proto(), cas.DigestOf(random).Proto()},
			AcceptableCompressors: accept,
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	r := read(repb.Compressor_ZSTD)
	if r.Responses[0].Compressor != repb.Compressor_ZSTD || !bytes.Equal(testblob.Decompress(t, r.Responses[0].Data), text) {
		t.Fatalf("the compressed blob, zstd accepted: %v", r.Responses[0].Compressor)
	}
	if r.Responses[1].Compressor != repb.Compressor_IDENTITY || !bytes.Equal(r.Responses[1].Data, random) {
		t.Fatalf("the plain blob, zstd accepted: %v", r.Responses[1].Compressor)
	}
	r = read()
	if r.Responses[0].Compressor != repb.Compressor_IDENTITY || !bytes.Equal(r.Responses[0].Data, text) {
		t.Fatal("the compressed blob, zstd not accepted")
	}
}
