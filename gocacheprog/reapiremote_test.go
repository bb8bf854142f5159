package gocacheprog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/gocacheprog"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeREAPI is a REAPI cache over maps (the action cache, and ByteStream
// reads of the CAS) that counts the RPCs it is sent, inlines an output
// file asked for if inline is set, and inlines the bytes of lie instead
// if that is set.
type fakeREAPI struct {
	repb.UnimplementedActionCacheServer
	bspb.UnimplementedByteStreamServer

	inline bool
	lie    []byte
	// asked, if set, is called with each GetActionResult's action hash.
	asked func(hash string)

	mu      sync.Mutex
	results map[string]*repb.ActionResult // by action hash
	blobs   map[string][]byte             // by hash

	rpcs, reads atomic.Int64
}

// newFakeREAPI serves f on loopback and returns a Remote for it.
func newFakeREAPI(t testing.TB, f *fakeREAPI) gocacheprog.Remote {
	t.Helper()
	f.results, f.blobs = map[string]*repb.ActionResult{}, map[string][]byte{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			f.rpcs.Add(1)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			f.rpcs.Add(1)
			return h(srv, ss)
		}))
	repb.RegisterActionCacheServer(g, f)
	bspb.RegisterByteStreamServer(g, f)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	r, err := gocacheprog.OpenRemote("grpc://"+lis.Addr().String(), gocacheprog.RemoteConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// store keeps body as action's output, as REAPIRemote.Put does.
func (f *fakeREAPI) store(action string, body []byte) { f.storeID(actionID(action), body) }

// storeID keeps body as the output of the action whose ID is action.
func (f *fakeREAPI) storeID(action, body []byte) {
	out := hex.EncodeToString(outputID(body))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blobs[out] = body
	f.results[hex.EncodeToString(action)] = &repb.ActionResult{OutputFiles: []*repb.OutputFile{
		{Path: gocacheprog.OutputPath, Digest: &repb.Digest{Hash: out, SizeBytes: int64(len(body))}},
	}}
}

func (f *fakeREAPI) GetActionResult(_ context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	if f.asked != nil {
		f.asked(req.GetActionDigest().GetHash())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	stored, ok := f.results[req.GetActionDigest().GetHash()]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such action")
	}
	file := stored.OutputFiles[0]
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: file.Path, Digest: file.Digest}}}
	if f.inline && slices.Contains(req.InlineOutputFiles, file.Path) {
		ar.OutputFiles[0].Contents = f.blobs[file.Digest.Hash]
		if f.lie != nil {
			ar.OutputFiles[0].Contents = f.lie
		}
	}
	return ar, nil
}

func (f *fakeREAPI) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	f.reads.Add(1)
	f.mu.Lock()
	var data []byte
	var ok bool
	for hash, b := range f.blobs {
		if bytes.Contains([]byte(req.ResourceName), []byte(hash)) {
			data, ok = b, true
		}
	}
	f.mu.Unlock()
	if !ok {
		return status.Error(codes.NotFound, "no such blob")
	}
	return stream.Send(&bspb.ReadResponse{Data: data})
}

// A get from a REAPI cache that inlines the output is one round trip: the
// GetActionResult asks for it, and no ByteStream read follows. From one
// that does not, it is two, and a hit all the same.
func TestREAPIGetIsOneRoundTripWhenInlined(t *testing.T) {
	body := []byte("an object file, inlined or read")
	compile := hex.EncodeToString(actionID("compile"))
	for _, inline := range []bool{true, false} {
		var asked atomic.Int64 // not counting the compiler output fetched ahead
		f := &fakeREAPI{inline: inline, asked: func(hash string) {
			if hash == compile {
				asked.Add(1)
			}
		}}
		c := openCache(t, gocacheprog.Options{Remote: newFakeREAPI(t, f)})
		f.store("compile", body)
		e, ok := c.Get(context.Background(), id(actionID("compile")))
		if !ok || !bytes.Equal(readDiskPath(t, e), body) {
			t.Fatalf("inline %v: get: %+v, %v", inline, e, ok)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wantReads := int64(0)
		if !inline {
			wantReads = 1
		}
		if got, reads := asked.Load()+f.reads.Load(), f.reads.Load(); got != 1+wantReads || reads != wantReads {
			t.Errorf("inline %v: a get took %d RPCs, %d of them ByteStream reads; want %d and %d", inline, got, reads, 1+wantReads, wantReads)
		}
	}
}

// stdoutKey is go's cache.Subkey(actionID, "stdout"): where go keeps a
// compiled package's compiler output, and asks for it after each package
// it gets.
func stdoutKey(action []byte) []byte {
	h := sha256.Sum256(slices.Concat([]byte("subkey:"), action, []byte("stdout")))
	return h[:]
}

// After a remote hit of a compiled package (an archive), the compiler
// output go asks for next is fetched ahead, in the background: go's get
// of it costs no round trip of its own, whether the remote holds it or
// not. A miss, or an output of another kind (go's module index), fetches
// nothing ahead.
func TestGetFetchesCompilerOutputAhead(t *testing.T) {
	arrived := make(chan string, 8)
	f := &fakeREAPI{inline: true, asked: func(hash string) { arrived <- hash }}
	c := openCache(t, gocacheprog.Options{Remote: newFakeREAPI(t, f)})
	// awaitAsked waits for the remote to be asked for action, which go
	// has not asked for yet.
	awaitAsked := func(action []byte) {
		t.Helper()
		for {
			select {
			case h := <-arrived:
				if h == hex.EncodeToString(action) {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the remote was never asked for %x before go asked", action)
			}
		}
	}
	body := []byte("!<arch>\n__.PKGDEF an object file")
	f.store("compile", body)
	f.storeID(stdoutKey(actionID("compile")), nil) // go keeps an empty compiler output too
	if _, ok := c.Get(context.Background(), id(actionID("compile"))); !ok {
		t.Fatal("a miss")
	}
	awaitAsked(stdoutKey(actionID("compile")))
	if e, ok := c.Get(context.Background(), id(stdoutKey(actionID("compile")))); !ok || e.Size != 0 {
		t.Fatalf("the compiler output: %+v, %v", e, ok)
	}
	if n := f.rpcs.Load(); n != 2 {
		t.Errorf("go's two gets took %d RPCs, want 2", n)
	}
	f.store("no output kept", append(body, '2'))
	if _, ok := c.Get(context.Background(), id(actionID("no output kept"))); !ok {
		t.Fatal("a miss")
	}
	awaitAsked(stdoutKey(actionID("no output kept")))
	if _, ok := c.Get(context.Background(), id(stdoutKey(actionID("no output kept")))); ok {
		t.Fatal("a hit of what the remote does not hold")
	}
	if n := f.rpcs.Load(); n != 4 {
		t.Errorf("after a miss fetched ahead, go's get of it took %d RPCs, want none", n-3)
	}
	if n := c.Stats().AheadTries.Load(); n != 2 {
		t.Fatalf("%d fetches ahead for 2 packages", n)
	}
	if _, ok := c.Get(context.Background(), id(actionID("never built"))); ok {
		t.Fatal("a hit of what the remote does not hold")
	}
	f.store("module index", []byte("go index v2 of a module"))
	f.storeID(stdoutKey(actionID("module index")), nil)
	if _, ok := c.Get(context.Background(), id(actionID("module index"))); !ok {
		t.Fatal("a miss")
	}
	if n := c.Stats().AheadTries.Load(); n != 2 {
		t.Errorf("a miss or a module index fetched %d more ahead, want none", n-2)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().FetchedAhead.Load(); n != 1 {
		t.Errorf("%d outputs fetched ahead, want 1", n)
	}
}

// A remote hit is answered once its output is in place: an entry that
// cannot be written costs only later go commands a local hit.
func TestRemoteHitAnsweredWithoutItsEntry(t *testing.T) {
	f := &fakeREAPI{inline: true}
	dir := t.TempDir()
	c := openCache(t, gocacheprog.Options{Dir: dir, Remote: newFakeREAPI(t, f)})
	defer c.Close()
	body := []byte("an object file")
	f.store("compile", body)
	shard := filepath.Join(dir, "a", hex.EncodeToString(actionID("compile"))[:2])
	if err := os.WriteFile(shard, nil, 0o644); err != nil { // no directory for the entry
		t.Fatal(err)
	}
	e, ok := c.Get(context.Background(), id(actionID("compile")))
	if !ok || !bytes.Equal(readDiskPath(t, e), body) {
		t.Fatalf("a remote hit whose entry cannot be written: %+v, %v", e, ok)
	}
}

// Inlined bytes that do not hash to the output ID are refused as streamed
// ones are: a miss, nothing kept in the directory, a mismatch counted, and
// the remote left alone after.
func TestREAPIInlinedLieIsRefused(t *testing.T) {
	body := []byte("the real output")
	f := &fakeREAPI{inline: true, lie: []byte("the fake output")} // of the same length
	dir := t.TempDir()
	c := openCache(t, gocacheprog.Options{Dir: dir, Remote: newFakeREAPI(t, f)})
	defer c.Close()
	f.store("x", body)
	f.store("y", body)
	if e, ok := c.Get(context.Background(), id(actionID("x"))); ok {
		t.Fatalf("a hit from inlined bytes that lie: %+v (holding %q)", e, readDiskPath(t, e))
	}
	out := hex.EncodeToString(outputID(body))
	if _, err := os.Stat(filepath.Join(dir, "o", out[:2], out)); !os.IsNotExist(err) {
		t.Fatalf("the directory kept the lie: %v", err)
	}
	if c.Stats().Mismatches.Load() != 1 {
		t.Errorf("%d mismatches counted, want 1", c.Stats().Mismatches.Load())
	}
	if _, ok := c.Get(context.Background(), id(actionID("y"))); ok || f.rpcs.Load() != 1 {
		t.Fatalf("after the lie: %d RPCs reached the remote, want 1", f.rpcs.Load())
	}
}

// BenchmarkGet is what go's gets cost for a compiled package, its output
// then its compiler output, as go asks them: from the directory (a warm
// machine), and from a REAPI cache that inlines the outputs into an empty
// directory (machine B). files/op counts the files (inodes) a package
// leaves in the directory: making one is the dearest syscall of a get.
func BenchmarkGet(b *testing.B) {
	body := append([]byte("!<arch>\n"), bytes.Repeat([]byte("an object file "), 4<<10)...) // 60 KiB
	for _, from := range []string{"local", "remote"} {
		b.Run(from, func(b *testing.B) {
			f := &fakeREAPI{inline: true}
			remote := newFakeREAPI(b, f)
			actions := make([]gocacheprog.ID, b.N)
			for i := range actions {
				name := fmt.Sprint("compile ", i)
				f.store(name, slices.Concat(body, []byte(name)))
				f.storeID(stdoutKey(actionID(name)), nil)
				actions[i] = id(actionID(name))
			}
			dir := b.TempDir()
			if from == "local" {
				fill := openCache(b, gocacheprog.Options{Dir: dir, Remote: remote})
				for _, a := range actions {
					fill.Get(context.Background(), a)
					fill.Get(context.Background(), gocacheprog.ID(stdoutKey(a[:])))
				}
				fill.Close()
				remote = newFakeREAPI(b, &fakeREAPI{}) // holds nothing: a local miss would show
			}
			c := openCache(b, gocacheprog.Options{Dir: dir, Remote: remote})
			files := countFiles(b, dir)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, ok := c.Get(context.Background(), actions[i]); !ok {
					b.Fatal("a miss")
				}
				if _, ok := c.Get(context.Background(), gocacheprog.ID(stdoutKey(actions[i][:]))); !ok {
					b.Fatal("a miss of the compiler output")
				}
			}
			b.StopTimer()
			c.Close()
			b.ReportMetric(float64(countFiles(b, dir)-files)/float64(b.N), "files/op")
		})
	}
}

// countFiles counts the files under dir, a file with several links once.
func countFiles(b *testing.B, dir string) int {
	bySize := map[int64][]os.FileInfo{} // the distinct files of each size
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(bySize[fi.Size()], func(o os.FileInfo) bool { return os.SameFile(o, fi) }) {
			bySize[fi.Size()] = append(bySize[fi.Size()], fi)
			n++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// Close ends a fetch ahead still waiting for the remote without counting
// it the remote's failure (nor logging one).
func TestCloseEndsFetchesAheadQuietly(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	stdout := hex.EncodeToString(stdoutKey(actionID("compile")))
	f := &fakeREAPI{inline: true, asked: func(hash string) {
		if hash == stdout {
			close(arrived)
			<-release
		}
	}}
	c := openCache(t, gocacheprog.Options{Remote: newFakeREAPI(t, f)})
	defer close(release) // before the server stops
	f.store("compile", []byte("!<arch>\nan object file"))
	if _, ok := c.Get(context.Background(), id(actionID("compile"))); !ok {
		t.Fatal("a miss")
	}
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the compiler output was never fetched ahead")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().RemoteErrors.Load(); n != 0 {
		t.Errorf("closing during a fetch ahead counted %d remote errors, want 0", n)
	}
}
