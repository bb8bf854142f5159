package reapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/internal/testblob"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// badDigests are malformed digests every RPC must refuse.
var badDigests = map[string]*repb.Digest{
	"empty hash": {Hash: "", SizeBytes: 1},
	"short":      {Hash: testHash[:63], SizeBytes: 3},
	"long":       {Hash: testHash + "0", SizeBytes: 3},
	"uppercase":  {Hash: strings.ToUpper(testHash), SizeBytes: 3},
	"non-hex":    {Hash: testHash[:63] + "x", SizeBytes: 3},
	"negative":   {Hash: testHash, SizeBytes: -1},
}

func TestFindMissingBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	have := e.put([]byte("have"))
	missing := cas.DigestOf([]byte("missing"))
	resp, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{
		InstanceName: "any/instance",
		BlobDigests:  []*repb.Digest{have.Proto(), missing.Proto(), cas.DigestOf(nil).Proto(), {Hash: have.Hash, SizeBytes: have.Size + 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.MissingBlobDigests) != 2 || resp.MissingBlobDigests[0].Hash != missing.Hash || resp.MissingBlobDigests[1].SizeBytes != have.Size+1 {
		t.Fatalf("missing %v", resp.MissingBlobDigests)
	}
	for what, bd := range badDigests {
		_, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{have.Proto(), bd}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "blob_digests[1]") {
			t.Errorf("%s digest: %v, want INVALID_ARGUMENT naming blob_digests[1]", what, err)
		}
	}
	_, err = e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_MD5})
	wantCode(t, err, codes.InvalidArgument, "MD5 is not served")
	_, err = e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{DigestFunction: repb.DigestFunction_SHA384, BlobDigests: []*repb.Digest{have.Proto()}})
	wantCode(t, err, codes.InvalidArgument, "a SHA-384 hash is 96")
}

func TestBatchUpdateBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{MaxBatchBytes: 1000})
	ctx := context.Background()
	good := []byte("good blob")
	gd := cas.DigestOf(good)
	reqs := []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: gd.Proto(), Data: good},
		{Digest: cas.DigestOf([]byte("other")).Proto(), Data: []byte("not other")},
		{Digest: cas.DigestOf([]byte("zz")).Proto(), Data: []byte("zz"), Compressor: repb.Compressor_ZSTD},
		{Digest: cas.DigestOf(nil).Proto()},
	}
	for _, bd := range badDigests {
		reqs = append(reqs, &repb.BatchUpdateBlobsRequest_Request{Digest: bd, Data: []byte("123")})
	}
	resp, err := e.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.InvalidArgument, codes.InvalidArgument, codes.OK}
	for range badDigests {
		want = append(want, codes.InvalidArgument)
	}
	for i, r := range resp.Responses {
		if codes.Code(r.Status.Code) != want[i] {
			t.Errorf("blob %d: status %v, want %v", i, r.Status, want[i])
		}
	}
	if !stored(e.store, gd) || stored(e.store, cas.DigestOf([]byte("other"))) {
		t.Fatal("wrong blobs stored")
	}
	_, err = e.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: cas.DigestOf(testblob.Pattern(600, 1)).Proto(), Data: testblob.Pattern(600, 1)},
		{Digest: cas.DigestOf(testblob.Pattern(600, 2)).Proto(), Data: testblob.Pattern(600, 2)},
	}})
	wantCode(t, err, codes.InvalidArgument, "max_batch_total_size_bytes 1000")
	if stored(e.store, cas.DigestOf(testblob.Pattern(600, 1))) {
		t.Fatal("an oversize batch stored something")
	}
}

func TestBatchReadBlobs(t *testing.T) {
	e := newEnv(t, 0, Options{MaxBatchBytes: 1000})
	ctx := context.Background()
	a := e.put([]byte("blob a"))
	missing := cas.DigestOf([]byte("missing"))
	ds := []*repb.Digest{a.Proto(), missing.Proto(), cas.DigestOf(nil).Proto()}
	for _, bd := range badDigests {
		ds = append(ds, bd)
	}
	resp, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: ds})
	if err != nil {
		t.Fatal(err)
	}
	want := []codes.Code{codes.OK, codes.NotFound, codes.OK}
	for range badDigests {
		want = append(want, codes.InvalidArgument)
	}
	for i, r := range resp.Responses {
		if codes.Code(r.Status.Code) != want[i] {
			t.Errorf("blob %d: status %v, want %v", i, r.Status, want[i])
		}
	}
	if string(resp.Responses[0].Data) != "blob a" || len(resp.Responses[2].Data) != 0 {
		t.Fatalf("data %q, %q", resp.Responses[0].Data, resp.Responses[2].Data)
	}
	_, err = e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{a.Proto(), {Hash: missing.Hash, SizeBytes: 995}}})
	wantCode(t, err, codes.InvalidArgument, "max_batch_total_size_bytes 1000")
}

func TestGetTree(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	leaf := &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: cas.DigestOf([]byte("f")).Proto()}}}
	leafD := e.putDir(leaf)
	missingDir := cas.DigestOf([]byte("not a stored directory"))
	mid := &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "leaf", Digest: leafD.Proto()}, {Name: "gone", Digest: missingDir.Proto()}}}
	midD := e.putDir(mid)
	root := &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "a", Digest: midD.Proto()}, {Name: "b", Digest: leafD.Proto()}}}
	rootD := e.putDir(root)

	collect := func(req *repb.GetTreeRequest) ([]*repb.GetTreeResponse, error) {
		stream, err := e.cas.GetTree(ctx, req)
		if err != nil {
			return nil, err
		}
		var out []*repb.GetTreeResponse
		for {
			r, err := stream.Recv()
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	pages, err := collect(&repb.GetTreeRequest{RootDigest: rootD.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != 1 || len(pages[0].Directories) != 3 || pages[0].NextPageToken != "" {
		t.Fatalf("whole tree: %v (want root, mid, leaf once; the missing directory left out)", pages)
	}
	// Paged, one directory per page.
	var all int
	token := ""
	for i := 0; ; i++ {
		pages, err := collect(&repb.GetTreeRequest{RootDigest: rootD.Proto(), PageSize: 1, PageToken: token})
		if err != nil || len(pages) != 1 || len(pages[0].Directories) != 1 {
			t.Fatalf("page %d: %v, %v", i, pages, err)
		}
		all++
		token = pages[0].NextPageToken
		if token == "" {
			break
		}
	}
	if all != 3 {
		t.Fatalf("%d pages, want 3", all)
	}
	_, err = collect(&repb.GetTreeRequest{RootDigest: missingDir.Proto()})
	wantCode(t, err, codes.NotFound, "tree root")

	// A blob too large to be a Directory is never read as one: a child
	// naming it is left out, a root naming it is refused.
	huge := e.put(testblob.Pattern(maxDirectoryBytes+1, 3))
	withHuge := e.putDir(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "leaf", Digest: leafD.Proto()}, {Name: "big", Digest: huge.Proto()}}})
	pages, err = collect(&repb.GetTreeRequest{RootDigest: withHuge.Proto()})
	if err != nil || len(pages) != 1 || len(pages[0].Directories) != 2 {
		t.Fatalf("tree with a huge child: %v, %v (want the root and the leaf)", pages, err)
	}
	_, err = collect(&repb.GetTreeRequest{RootDigest: huge.Proto()})
	wantCode(t, err, codes.InvalidArgument, "larger than a Directory")
	_, err = collect(&repb.GetTreeRequest{RootDigest: rootD.Proto(), PageToken: "bogus"})
	wantCode(t, err, codes.InvalidArgument, "page_token")
	_, err = collect(&repb.GetTreeRequest{RootDigest: badDigests["uppercase"]})
	wantCode(t, err, codes.InvalidArgument, "root_digest")
}

func TestActionCache(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	ad := cas.DigestOf([]byte("action"))
	_, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.NotFound, "action result")

	out := e.put([]byte("output"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: out.Proto()}}, ExitCode: 1}
	got, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: "x", ActionDigest: ad.Proto(), ActionResult: ar})
	if err != nil || got.ExitCode != 1 {
		t.Fatalf("update: %v, %v", got, err)
	}
	got, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: "y", ActionDigest: ad.Proto()})
	if err != nil || got.ExitCode != 1 || got.OutputFiles[0].Digest.Hash != out.Hash {
		t.Fatalf("get: %v, %v", got, err)
	}

	// A result whose outputs are gone is a miss.
	ad2 := cas.DigestOf([]byte("action 2"))
	gone := cas.DigestOf([]byte("never uploaded"))
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad2.Proto(), ActionResult: &repb.ActionResult{StdoutDigest: gone.Proto()}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad2.Proto()})
	wantCode(t, err, codes.NotFound, "stdout")

	_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.InvalidArgument, "action_result is missing")
	_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: &repb.ActionResult{
		OutputFiles: []*repb.OutputFile{{Path: "bad", Digest: badDigests["short"]}}}})
	wantCode(t, err, codes.InvalidArgument, `output file "bad"`)
	for what, bd := range badDigests {
		_, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: bd})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("get with %s digest: %v", what, err)
		}
		_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: bd, ActionResult: ar})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("update with %s digest: %v", what, err)
		}
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto(), DigestFunction: repb.DigestFunction_SHA1})
	wantCode(t, err, codes.InvalidArgument, "a SHA-1 hash is 40")
}

// TestActionResultOutputPaths: UpdateActionResult refuses a result whose
// output paths would lead a client that restores it out of its working
// directory, naming the path, and stores nothing; a stored entry with such a
// path (written before the check existed) is not served.
func TestActionResultOutputPaths(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	out := e.put([]byte("output"))
	ad := cas.DigestOf([]byte("an action with a bad path"))
	for _, tc := range []struct {
		ar   *repb.ActionResult
		want string
	}{
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "ok", Digest: out.Proto()}, {Path: "../../../etc/passwd", Digest: out.Proto()}}}, `output file "../../../etc/passwd": path has a ".." component`},
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "/etc/passwd", Digest: out.Proto()}}}, `output file "/etc/passwd": path is absolute`},
		{&repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "a//b", TreeDigest: out.Proto()}}}, `output directory "a//b": path has an empty component`},
		{&repb.ActionResult{OutputSymlinks: []*repb.OutputSymlink{{Path: "link/", Target: "x"}}}, `output symlink "link/"`},
		//lint:ignore SA1019 the deprecated fields are checked too: old clients fill them in
		{&repb.ActionResult{OutputFileSymlinks: []*repb.OutputSymlink{{Path: "./x", Target: "x"}}}, `output file symlink "./x"`},
		//lint:ignore SA1019 the deprecated fields are checked too: old clients fill them in
		{&repb.ActionResult{OutputDirectorySymlinks: []*repb.OutputSymlink{{Path: "..", Target: "x"}}}, `output directory symlink ".."`},
	} {
		_, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: tc.ar})
		wantCode(t, err, codes.InvalidArgument, tc.want)
		_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
		wantCode(t, err, codes.NotFound, "action result")
	}
	// The whole working directory as an output directory is allowed.
	whole := &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "", TreeDigest: out.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: whole}); err != nil {
		t.Fatalf("an output directory with the empty path: %v", err)
	}

	// An entry stored as it was before paths were checked.
	old := cas.DigestOf([]byte("stored before the check"))
	data, err := marshalDeterministic(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "../x", Digest: out.Proto()}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.PutActionResult(ctx, old, data); err != nil {
		t.Fatal(err)
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: old.Proto()})
	wantCode(t, err, codes.NotFound, "unsafe output path")
}

// TestCorruptBlobIsNotFound flips a byte of a stored blob while the server
// is stopped: the next read is NOT_FOUND, never the bad bytes;
// FindMissingBlobs then reports the blob missing, a batch read answers
// NOT_FOUND for it, and a client can upload it again.
func TestCorruptBlobIsNotFound(t *testing.T) {
	e := newFileEnv(t, 0, Options{})
	ctx := context.Background()
	data := testblob.Pattern(300<<10, 5)
	d := e.put(data)
	intact := e.put([]byte("an intact neighbour"))
	e.stop()
	disktest.FlipByte(t, disktest.BlobPath(e.dir, d), 123, true)
	e.start()

	_, msgs, err := e.read(readName(d), 0, 0)
	if msgs > 0 {
		t.Fatalf("the read of the corrupt blob sent %d messages of data", msgs)
	}
	wantCode(t, err, codes.NotFound, "does not match its digest")
	resp, err := e.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{d.Proto(), intact.Proto()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.MissingBlobDigests) != 1 || resp.MissingBlobDigests[0].Hash != d.Hash {
		t.Fatalf("FindMissingBlobs after the corrupt read: %v; want only the corrupt blob", resp.MissingBlobDigests)
	}
	batch, err := e.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{Digests: []*repb.Digest{d.Proto(), intact.Proto()}})
	if err != nil {
		t.Fatal(err)
	}
	if c := codes.Code(batch.Responses[0].Status.GetCode()); c != codes.NotFound || len(batch.Responses[0].Data) > 0 {
		t.Errorf("BatchReadBlobs of the corrupt blob: %v with %d bytes; want NOT_FOUND and none", c, len(batch.Responses[0].Data))
	}
	if c := codes.Code(batch.Responses[1].Status.GetCode()); c != codes.OK || string(batch.Responses[1].Data) != "an intact neighbour" {
		t.Errorf("BatchReadBlobs of the intact blob: %v, %q", c, batch.Responses[1].Data)
	}
	if st := e.store.Stats(); st.Corrupt != 1 {
		t.Errorf("cas.StoreStats.Corrupt = %d; want 1", st.Corrupt)
	}
	e.put(data)
	if got, _, err := e.read(readName(d), 0, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after uploading the blob again: %d bytes, %v", len(got), err)
	}
}

// TestGetTreePagesCostTheirOwnReads pages through a tree of 931
// directories 100 at a time: each page reads about its own directories (the
// store's lookup count), not the tree before it; the pages together are the
// whole tree in the order of an unpaged call; a page token used twice (a
// retried request) and a position-only token give the same page.
func TestGetTreePagesCostTheirOwnReads(t *testing.T) {
	e := newEnv(t, 0, Options{})
	ctx := context.Background()
	root := &repb.Directory{}
	for i := range 30 {
		mid := &repb.Directory{}
		for j := range 30 {
			leaf := e.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: fmt.Sprintf("f%d-%d", i, j), Digest: cas.DigestOf(nil).Proto()}}})
			mid.Directories = append(mid.Directories, &repb.DirectoryNode{Name: fmt.Sprint("l", j), Digest: leaf.Proto()})
		}
		root.Directories = append(root.Directories, &repb.DirectoryNode{Name: fmt.Sprint("m", i), Digest: e.putDir(mid).Proto()})
	}
	rootD := e.putDir(root)
	const total = 1 + 30 + 30*30

	page := func(token string) *repb.GetTreeResponse {
		t.Helper()
		stream, err := e.cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: rootD.Proto(), PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("GetTree page at %q: %v", token, err)
		}
		if _, err := stream.Recv(); err != io.EOF {
			t.Fatalf("GetTree with page_size sent more than one page: %v", err)
		}
		return resp
	}
	var paged []*repb.Directory
	token, pages := "", 0
	for {
		before, _ := e.lookups.Lookups()
		resp := page(token)
		after, _ := e.lookups.Lookups()
		reads := after - before
		// Its own directories, the one after them (to know there is
		// more), and the one before them again (it was that one).
		if reads > int64(len(resp.Directories))+2 {
			t.Errorf("page %d (%d directories) read %d directories", pages, len(resp.Directories), reads)
		}
		paged = append(paged, resp.Directories...)
		pages++
		if pages == 7 {
			// A retried request: the same token again gives the same
			// page, and so does its position alone.
			pos, _, _ := strings.Cut(token, ".")
			for _, again := range []string{token, pos} {
				if r := page(again); len(r.Directories) != 100 || !proto.Equal(r.Directories[0], resp.Directories[0]) {
					t.Errorf("page at %q again: %d directories, first differs: %v", again, len(r.Directories), !proto.Equal(r.Directories[0], resp.Directories[0]))
				}
			}
		}
		if resp.NextPageToken == "" {
			break
		}
		token = resp.NextPageToken
	}
	if pages != (total+99)/100 || len(paged) != total {
		t.Fatalf("%d pages holding %d directories; want %d pages, %d", pages, len(paged), (total+99)/100, total)
	}
	stream, err := e.cas.GetTree(ctx, &repb.GetTreeRequest{RootDigest: rootD.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	var whole []*repb.Directory
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		whole = append(whole, resp.Directories...)
	}
	if len(whole) != total {
		t.Fatalf("unpaged GetTree: %d directories; want %d", len(whole), total)
	}
	for i := range whole {
		if !proto.Equal(whole[i], paged[i]) {
			t.Fatalf("directory %d differs between the paged and the unpaged walk", i)
		}
	}
}

// openTestStore opens a disk store in dir for a test that makes its own
// Server over it.
func openTestStore(t *testing.T, dir string, maxSize int64, opts ...disk.StoreOption) *disk.Store {
	t.Helper()
	s, err := disk.OpenStore(dir, maxSize, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestActionResultNamingABlobLostInACrashIsAMiss: what a crash of the
// machine can leave of a small blob's upload (with --pack-sync, one
// acknowledged in the last interval): its record in a segment still .open,
// its data never written. After the restart the blob is missing (reads and
// FindMissingBlobs say so) and the action result naming it is a miss, not
// a result whose output cannot be read.
func TestActionResultNamingABlobLostInACrashIsAMiss(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, Options{})
	out := testblob.Random(5000, 77)
	dOut := e.put(out)
	ad := cas.DigestOf([]byte("an action whose output a crash loses"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: dOut.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	// The machine "crashes": the store's directory as it is now, with the
	// output's data gone from its segment.
	crashed := t.TempDir()
	if err := os.CopyFS(crashed, os.DirFS(e.dir)); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(crashed, "packs", "*.open"))
	lost := false
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, out); i >= 0 {
			copy(b[i:], make([]byte, len(out)))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			lost = true
		}
	}
	if !lost {
		t.Fatalf("the output's record is in no .open segment of %v", segs)
	}
	e2 := &testEnv{t: t, dir: crashed}
	e2.start()
	t.Cleanup(e2.stop)
	_, err := e2.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.NotFound, "action result")
	missing, err := e2.cas.FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{dOut.Proto()}})
	if err != nil || len(missing.MissingBlobDigests) != 1 {
		t.Fatalf("FindMissingBlobs after the crash: %v, %v; want the lost output", missing, err)
	}
	_, _, err = e2.read(readName(dOut), 0, 0)
	wantCode(t, err, codes.NotFound, "")
}
