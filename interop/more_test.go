package interop

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/digest"
	"github.com/bazelbuild/remote-apis-sdks/go/pkg/filemetadata"
	"github.com/bazelbuild/remote-apis-sdks/go/pkg/uploadinfo"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/protobuf/proto"
)

// TestSDKBuildFlow does what a build client does around one cached action:
// upload its input tree and outputs, record the result, then later fetch
// the tree with GetTree and download the outputs to disk.
func TestSDKBuildFlow(t *testing.T) { eachTopology(t, testSDKBuildFlow) }

func testSDKBuildFlow(t *testing.T, startServer startFunc) {
	ctx := testContext(t)
	srv := startServer(t, t.TempDir())
	c := srv.newClient(t, ctx, instance)

	main := []byte("package main\n\nfunc main() {}\n")
	binary := randomBlob(t, 3<<20+7)
	lib := &repb.Directory{Files: []*repb.FileNode{{Name: "lib.go", Digest: digest.NewFromBlob([]byte("package lib\n")).ToProto()}}}
	libDg, err := digest.NewFromMessage(lib)
	if err != nil {
		t.Fatal(err)
	}
	root := &repb.Directory{
		Files:       []*repb.FileNode{{Name: "main.go", Digest: digest.NewFromBlob(main).ToProto()}},
		Directories: []*repb.DirectoryNode{{Name: "lib", Digest: libDg.ToProto()}},
	}
	var entries []*uploadinfo.Entry
	for _, b := range [][]byte{main, []byte("package lib\n"), binary} {
		entries = append(entries, uploadinfo.EntryFromBlob(b))
	}
	for _, m := range []proto.Message{lib, root} {
		e, err := uploadinfo.EntryFromProto(m)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	if _, _, err := c.UploadIfMissing(ctx, entries...); err != nil {
		t.Fatalf("UploadIfMissing: %v", err)
	}
	rootDg, err := digest.NewFromMessage(root)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("GetDirectoryTree", func(t *testing.T) {
		dirs, err := c.GetDirectoryTree(ctx, rootDg.ToProto())
		if err != nil {
			t.Fatalf("GetDirectoryTree: %v", err)
		}
		if len(dirs) != 2 || !proto.Equal(dirs[0], root) || !proto.Equal(dirs[1], lib) {
			t.Errorf("GetDirectoryTree = %v; want the root, then lib", dirs)
		}
	})

	t.Run("DownloadActionOutputs", func(t *testing.T) {
		ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{
			{Path: "bin/app", Digest: digest.NewFromBlob(binary).ToProto(), IsExecutable: true},
			{Path: "src/main.go", Digest: digest.NewFromBlob(main).ToProto()},
		}}
		action := digest.NewFromBlob([]byte("build action"))
		if _, err := c.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: instance, ActionDigest: action.ToProto(), ActionResult: ar}); err != nil {
			t.Fatalf("UpdateActionResult: %v", err)
		}
		cached, err := c.CheckActionCache(ctx, action.ToProto())
		if err != nil || cached == nil {
			t.Fatalf("CheckActionCache = %v, %v; want the result", cached, err)
		}
		out := t.TempDir()
		if _, err := c.DownloadActionOutputs(ctx, cached, out, filemetadata.NewNoopCache()); err != nil {
			t.Fatalf("DownloadActionOutputs: %v", err)
		}
		for path, want := range map[string][]byte{"bin/app": binary, "src/main.go": main} {
			got, err := os.ReadFile(filepath.Join(out, path))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s after DownloadActionOutputs: %d bytes, %v; want %d bytes", path, len(got), err, len(want))
			}
		}
	})

	t.Run("ReadBlobToFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "blob")
		if _, err := c.ReadBlobToFile(ctx, digest.NewFromBlob(binary), path); err != nil {
			t.Fatalf("ReadBlobToFile: %v", err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, binary) {
			t.Errorf("ReadBlobToFile wrote %d bytes, %v; want the %d-byte blob", len(got), err, len(binary))
		}
	})
}

// TestSDKResumedUpload sends half a blob without finishing, asks
// QueryWriteStatus how much the server kept, and finishes from there.
func TestSDKResumedUpload(t *testing.T) { eachTopology(t, testSDKResumedUpload) }

func testSDKResumedUpload(t *testing.T, startServer startFunc) {
	ctx := testContext(t)
	srv := startServer(t, t.TempDir())
	c := srv.newClient(t, ctx, instance)

	blob := randomBlob(t, 2<<20+3)
	dg := digest.NewFromBlob(blob)
	name, err := c.ResourceNameWrite(dg.Hash, dg.Size)
	if err != nil {
		t.Fatal(err)
	}
	half := int64(len(blob) / 2)
	if _, err := c.WriteBytesAtRemoteOffset(ctx, name, blob[:half], true, 0); err != nil {
		t.Logf("unfinished write ended with %v (the server may refuse a stream without finish_write)", err)
	}
	st, err := c.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil {
		t.Fatalf("QueryWriteStatus of the interrupted upload: %v", err)
	}
	if st.Complete || st.CommittedSize < 0 || st.CommittedSize > half {
		t.Fatalf("QueryWriteStatus = %v; want incomplete with at most %d bytes committed", st, half)
	}
	if missing, err := c.MissingBlobs(ctx, []digest.Digest{dg}); err != nil || len(missing) != 1 {
		t.Fatalf("MissingBlobs during the upload = %v, %v; want the blob still missing", missing, err)
	}
	if _, err := c.WriteBytesAtRemoteOffset(ctx, name, blob[st.CommittedSize:], false, st.CommittedSize); err != nil {
		t.Fatalf("resuming the upload at %d: %v", st.CommittedSize, err)
	}
	got, _, err := c.ReadBlob(ctx, dg)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("ReadBlob after the resumed upload: %d bytes, %v", len(got), err)
	}
	st, err = c.QueryWriteStatus(ctx, &bspb.QueryWriteStatusRequest{ResourceName: name})
	if err != nil || !st.Complete || st.CommittedSize != dg.Size {
		t.Errorf("QueryWriteStatus after finishing = %v, %v; want complete at %d", st, err, dg.Size)
	}
}

// TestSDKConcurrent runs several SDK clients at once against one server, each
// writing and reading its own blobs and all reading a shared one.
func TestSDKConcurrent(t *testing.T) { eachTopology(t, testSDKConcurrent) }

func testSDKConcurrent(t *testing.T, startServer startFunc) {
	ctx := testContext(t)
	srv := startServer(t, t.TempDir())
	shared := randomBlob(t, 5<<20)
	if _, err := srv.newClient(t, ctx, instance).WriteBlob(ctx, shared); err != nil {
		t.Fatal(err)
	}
	const clients, blobsEach = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := srv.newClient(t, ctx, fmt.Sprintf("client-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range blobsEach {
				blob := bytes.Repeat([]byte(fmt.Sprintf("client %d blob %d|", i, j)), 1000*(j+1)*(j+1))
				dg, err := c.WriteBlob(ctx, blob)
				if err != nil {
					errs <- fmt.Errorf("client %d: WriteBlob: %v", i, err)
					return
				}
				for _, want := range [][]byte{blob, shared} {
					got, _, err := c.ReadBlob(ctx, digest.NewFromBlob(want))
					if err != nil || !bytes.Equal(got, want) {
						errs <- fmt.Errorf("client %d: ReadBlob(%v): %d bytes, %v; want %d", i, dg, len(got), err, len(want))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
