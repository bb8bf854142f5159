package actionresult_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/disk"
)

func TestCheckNamesTheBadOutput(t *testing.T) {
	good := cas.DigestOf([]byte("out")).Proto()
	for _, tc := range []struct {
		ar   *repb.ActionResult
		want string // "" means accepted
	}{
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "bin/app", Digest: good}}, StdoutDigest: good}, ""},
		{nil, "missing"},
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "../x", Digest: good}}}, `output file "../x"`},
		{&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "x", Digest: &repb.Digest{Hash: "abc"}}}}, `output file "x"`},
		{&repb.ActionResult{StderrDigest: &repb.Digest{Hash: strings.Repeat("a", 64), SizeBytes: -1}}, "stderr"},
	} {
		err := actionresult.Check(tc.ar, cas.SHA256)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%v) = %v; want %q", tc.ar, err, tc.want)
		}
	}
}

// Load serves a result whose outputs are all stored, and makes a miss of
// one that names a missing blob, one that does not parse and one with an
// unsafe path (the last two as *Unservable, for the server to log).
func TestLoadServesOnlyWhatAClientCanUse(t *testing.T) {
	ctx := context.Background()
	store, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	out := []byte("an output")
	od := cas.DigestOf(out)
	if err := cas.Put(ctx, store, od, out, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) cas.Digest {
		d := cas.DigestOf([]byte(name))
		if err := store.PutActionResult(ctx, d, data); err != nil {
			t.Fatal(err)
		}
		return d
	}
	marshal := func(ar *repb.ActionResult) []byte {
		data, err := actionresult.Marshal(ar)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	served := marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "o", Digest: od.Proto()}}})
	ar, data, err := actionresult.Load(ctx, store, put("ok", served))
	if err != nil || len(ar.OutputFiles) != 1 || string(data) != string(served) {
		t.Fatalf("a servable result: %v, %v", ar, err)
	}
	gone := cas.DigestOf([]byte("gone"))
	for _, tc := range []struct {
		name       string
		data       []byte
		unservable bool
		want       string
	}{
		{"missing output", marshal(&repb.ActionResult{StdoutDigest: gone.Proto()}), false, "stdout (" + gone.Hash + ") is no longer in the CAS"},
		{"garbage", []byte{0xff, 0xff, 0xff}, true, "unreadable"},
		{"unsafe path", marshal(&repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "/etc/passwd", Digest: od.Proto()}}}), true, "unsafe output path"},
	} {
		_, _, err := actionresult.Load(ctx, store, put(tc.name, tc.data))
		_, isUnservable := errors.AsType[*actionresult.Unservable](err)
		if !errors.Is(err, cas.ErrNotFound) || isUnservable != tc.unservable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (unservable %v); want a miss saying %q, unservable %v", tc.name, err, isUnservable, tc.want, tc.unservable)
		}
	}
	if _, _, err := actionresult.Load(ctx, store, cas.DigestOf([]byte("never stored"))); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("no entry: %v", err)
	}
}
