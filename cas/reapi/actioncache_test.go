package reapi

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/actionresult"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// A result whose output directory's Tree names a file the CAS lacks is a
// miss, NOT_FOUND saying it is incomplete; once the file is uploaded, a
// hit. Bazel then runs the action again rather than fail to fetch it.
func TestGetActionResultMissesIncompleteTrees(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, Options{})
	a := e.put([]byte("file a"))
	bData := []byte("file b, in a subdirectory, not uploaded yet")
	b := cas.DigestOf(bData)
	tree, err := proto.Marshal(&repb.Tree{
		Root:     &repb.Directory{Files: []*repb.FileNode{{Name: "a", Digest: a.Proto()}}},
		Children: []*repb.Directory{{Files: []*repb.FileNode{{Name: "b", Digest: b.Proto()}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	td := e.put(tree)
	ad := cas.DigestOf([]byte("an action with a tree artifact"))
	ar := &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "out/dir", TreeDigest: td.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	_, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	wantCode(t, err, codes.NotFound, "incomplete")
	e.put(bData)
	if _, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()}); err != nil {
		t.Fatalf("every file stored: %v", err)
	}
}

// With InstanceIsolation a result is found under the instance it was
// stored under only; without, under any.
func TestInstanceIsolationSeparatesActionResults(t *testing.T) {
	ctx := context.Background()
	for _, isolated := range []bool{false, true} {
		e := newEnv(t, 0, Options{InstanceIsolation: isolated})
		out := e.put([]byte("stdout"))
		ad := cas.DigestOf([]byte("action"))
		if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: "team-a", ActionDigest: ad.Proto(), ActionResult: &repb.ActionResult{ExitCode: 7, StdoutDigest: out.Proto()}}); err != nil {
			t.Fatal(err)
		}
		for _, inst := range []string{"team-a", "team-b", ""} {
			res, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: inst, ActionDigest: ad.Proto()})
			if want := !isolated || inst == "team-a"; want != (err == nil) {
				t.Errorf("isolated %v, instance %q: %v, %v; want found %v", isolated, inst, res, err, want)
			} else if !want {
				wantCode(t, err, codes.NotFound, "")
			}
		}
		if isolated {
			// Kept under the instance's key, as the HTTP cache keeps it.
			if _, err := e.store.GetActionResult(ctx, actionresult.InstanceKey("team-a", ad), cas.ClientLookup); err != nil {
				t.Errorf("not under actionresult.InstanceKey: %v", err)
			}
		}
	}
}

// A client of one instance, the empty one included, that names another
// instance's key as its action digest reaches an entry of its own: it
// neither reads nor replaces the other instance's result, though anyone
// can compute that key.
func TestInstanceKeysAreNotReachableThroughAnotherInstance(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, Options{InstanceIsolation: true})
	out := e.put([]byte("team-a's stdout"))
	ad := cas.DigestOf([]byte("team-a's action"))
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: "team-a", ActionDigest: ad.Proto(), ActionResult: &repb.ActionResult{ExitCode: 7, StdoutDigest: out.Proto()}}); err != nil {
		t.Fatal(err)
	}
	key := actionresult.InstanceKey("team-a", ad).Proto()
	for _, through := range []string{"", "team-b", "team-a"} {
		_, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: through, ActionDigest: key})
		wantCode(t, err, codes.NotFound, "")
		if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: through, ActionDigest: key, ActionResult: &repb.ActionResult{ExitCode: 66, StdoutDigest: out.Proto()}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: "team-a", ActionDigest: ad.Proto()})
	if err != nil || res.ExitCode != 7 {
		t.Fatalf("team-a's result after others wrote its key: %v, %v; want exit code 7", res, err)
	}
}

// The access file's rules for an instance decide its GetActionResult and
// UpdateActionResult, and what GetCapabilities advertises for it.
func TestInstanceRulesOverGRPC(t *testing.T) {
	ctx := context.Background()
	rules, err := access.ReadInstanceRules(strings.NewReader("locked write-ac=nobody read-ac=nobody\n"))
	if err != nil {
		t.Fatal(err)
	}
	all := access.Anyone()
	e := newEnv(t, 0, Options{InstanceIsolation: true, Access: &access.Control{
		Policy: access.Policy{ReadCAS: all, WriteCAS: all, ReadAC: all, WriteAC: all}, Instances: rules}})
	ad := cas.DigestOf([]byte("action")).Proto()
	for inst, allowed := range map[string]bool{"locked": false, "open": true} {
		caps, err := e.caps.GetCapabilities(ctx, &repb.GetCapabilitiesRequest{InstanceName: inst})
		if err != nil || caps.CacheCapabilities.ActionCacheUpdateCapabilities.UpdateEnabled != allowed {
			t.Errorf("instance %q: capabilities %v, %v; want updates enabled %v", inst, caps, err, allowed)
		}
		_, err = e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: inst, ActionDigest: ad, ActionResult: &repb.ActionResult{ExitCode: 1}}) // not empty: an empty result, zero bytes, reads back as EOF from the disk store (a bug of its own)
		_, getErr := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: inst, ActionDigest: ad})
		if allowed {
			if err != nil || getErr != nil {
				t.Errorf("instance %q: update %v, get %v; want both to succeed", inst, err, getErr)
			}
			continue
		}
		wantCode(t, err, codes.PermissionDenied, `on instance "locked"`)
		wantCode(t, getErr, codes.PermissionDenied, `on instance "locked"`)
	}
}

// BenchmarkGetActionResultManyTrees is one result naming 20,000 distinct
// Trees of one file each (a 1.6 MB result) on the disk store, through
// gRPC, with a Loader that remembers no Tree: every request reads and
// checks each Tree, as after an eviction.
func BenchmarkGetActionResultManyTrees(b *testing.B) {
	ctx := context.Background()
	e := newEnv(b, 0, Options{})
	var puts []*repb.BatchUpdateBlobsRequest_Request
	ar := &repb.ActionResult{}
	for i := range 20_000 {
		f := []byte(fmt.Sprintf("file %d", i))
		fd := cas.DigestOf(f)
		tree, err := proto.Marshal(&repb.Tree{Root: &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: fd.Proto()}}}})
		if err != nil {
			b.Fatal(err)
		}
		td := cas.DigestOf(tree)
		puts = append(puts, &repb.BatchUpdateBlobsRequest_Request{Digest: fd.Proto(), Data: f}, &repb.BatchUpdateBlobsRequest_Request{Digest: td.Proto(), Data: tree})
		ar.OutputDirectories = append(ar.OutputDirectories, &repb.OutputDirectory{Path: fmt.Sprintf("out/%d", i), TreeDigest: td.Proto()})
	}
	for start := 0; start < len(puts); start += 4000 {
		if _, err := e.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: puts[start:min(start+4000, len(puts))]}); err != nil {
			b.Fatal(err)
		}
	}
	ad := cas.DigestOf([]byte("an action with 20,000 output directories"))
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}, grpc.MaxCallSendMsgSize(8<<20)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()}, grpc.MaxCallRecvMsgSize(8<<20)); err != nil {
			b.Fatal(err)
		}
	}
}

// GetActionResult inlines the blobs a request asks for, from the CAS, in
// the result's order while the answer stays within MaxBatchBytes; a
// blob past that bound, one not asked for, and a copy stored with the
// result are not served inline.
func TestGetActionResultInlinesWithinBounds(t *testing.T) {
	ctx := context.Background()
	const maxBatch = 64 << 10
	e := newEnv(t, 0, Options{MaxBatchBytes: maxBatch})
	blob := func(c byte, n int) []byte { return []byte(strings.Repeat(string(c), n)) }
	stdout, a, b, c, d := blob('o', 100), blob('a', 20<<10), blob('b', 30<<10), blob('c', 20<<10), blob('d', 10)
	ds := map[string]cas.Digest{}
	for name, data := range map[string][]byte{"stdout": stdout, "a": a, "b": b, "c": c, "d": d} {
		ds[name] = e.put(data)
	}
	empty := cas.DigestOf(nil)
	ad := cas.DigestOf([]byte("an action with outputs to inline"))
	ar := &repb.ActionResult{StdoutDigest: ds["stdout"].Proto(), OutputFiles: []*repb.OutputFile{
		{Path: "out/a", Digest: ds["a"].Proto(), Contents: []byte("a copy the uploader sent, not a's bytes")},
		{Path: "out/empty", Digest: empty.Proto()},
		{Path: "out/b", Digest: ds["b"].Proto()},
		{Path: "out/c", Digest: ds["c"].Proto()}, // past the bound: 50 KiB are taken
		{Path: "out/d", Digest: ds["d"].Proto()}, // not asked for
	}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	got, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto(), InlineStdout: true,
		InlineOutputFiles: []string{"out/a", "out/empty", "out/b", "out/c", "out/missing"}})

	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.StdoutRaw, stdout) {
		t.Errorf("stdout_raw: %d bytes, want the 100 asked for", len(got.StdoutRaw))
	}
	want := map[string][]byte{"out/a": a, "out/empty": nil, "out/b": b, "out/c": nil, "out/d": nil}
	for _, f := range got.OutputFiles {
		if !bytes.Equal(f.Contents, want[f.Path]) {
			t.Errorf("%s: %d bytes inlined (%.20q...), want %d", f.Path, len(f.Contents), f.Contents, len(want[f.Path]))
		}
	}
	if n := proto.Size(got); n > maxBatch {
		t.Errorf("the answer is %d bytes, over MaxBatchBytes %d", n, maxBatch)
	}

	// Not asked: nothing inline, not even the copy stored with the result.
	got, err = e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got.OutputFiles {
		if len(f.Contents) > 0 {
			t.Errorf("%s: %d bytes inlined unasked", f.Path, len(f.Contents))
		}
	}
	if len(got.StdoutRaw) > 0 {
		t.Errorf("stdout_raw inlined unasked")
	}
}

// A caller who may read the action cache but not the CAS gets no blob's
// bytes inlined: only a digest, which it cannot read either.
func TestGetActionResultInlinesOnlyForCASReaders(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, Options{Access: &access.Control{
		Policy: access.Policy{ReadCAS: access.Only("bob"), WriteCAS: access.Anyone(), ReadAC: access.Anyone(), WriteAC: access.Anyone()},
		Users:  loadUsers(t, map[string]string{"bob": "bobs-password"}),
	}})
	data := []byte("an output only CAS readers may read")
	od := e.put(data)
	ad := cas.DigestOf([]byte("an action"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: od.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}
	req := &repb.GetActionResultRequest{ActionDigest: ad.Proto(), InlineOutputFiles: []string{"out"}}
	for _, tc := range []struct {
		user string
		want []byte
	}{{"", nil}, {"bob", data}} {
		got, err := e.ac.GetActionResult(as(ctx, tc.user, "bobs-password"), req)
		if err != nil {
			t.Fatalf("%q: %v", tc.user, err)
		}
		if c := got.OutputFiles[0].Contents; !bytes.Equal(c, tc.want) {
			t.Errorf("caller %q: %q inlined, want %q", tc.user, c, tc.want)
		}
	}
}

// A result of a BLAKE3 action names BLAKE3 blobs: those are what is
// inlined, read under the action's function.
func TestGetActionResultInlinesUnderTheActionsFunction(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 0, Options{})
	out := []byte("an output named by its BLAKE3 hash")
	od := cas.BLAKE3.Digest(out)
	if err := cas.Put(ctx, e.store, od, out, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	ad := cas.BLAKE3.Digest([]byte("a BLAKE3 action"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "out", Digest: od.Proto()}}}
	if _, err := e.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.Proto(), ActionResult: ar, DigestFunction: repb.DigestFunction_BLAKE3}); err != nil {
		t.Fatal(err)
	}
	got, err := e.ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.Proto(), DigestFunction: repb.DigestFunction_BLAKE3, InlineOutputFiles: []string{"out"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OutputFiles) != 1 || !bytes.Equal(got.OutputFiles[0].Contents, out) {
		t.Errorf("output files %v, want out inlined", got.OutputFiles)
	}
}
