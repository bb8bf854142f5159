package actionresult_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
	"google.golang.org/protobuf/proto"
)

// fileNode is a Directory's file entry for blob d.
func fileNode(name string, d cas.Digest) *repb.FileNode {
	return &repb.FileNode{Name: name, Digest: d.Proto()}
}

// putTree stores a Tree of a root with the files root and one child
// directory with the files child, and returns its digest.
func putTree(t testing.TB, m *memStore, root, child []*repb.FileNode) cas.Digest {
	t.Helper()
	data, err := proto.Marshal(&repb.Tree{Root: &repb.Directory{Files: root}, Children: []*repb.Directory{{Files: child}}})
	if err != nil {
		t.Fatal(err)
	}
	return m.put(data)
}

// putResult stores ar for an action named name and returns its digest.
func putResult(t testing.TB, m *memStore, name string, ar *repb.ActionResult) cas.Digest {
	t.Helper()
	data, err := actionresult.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	d := cas.DigestOf([]byte(name))
	m.PutActionResult(context.Background(), d, data)
	return d
}

// A result is served only while every file of its output directory's
// Tree is stored, the child directories' too; one missing is a miss that
// names the directory and is counted.
func TestLoaderServesOnlyCompleteTrees(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	a, b := m.put([]byte("file a")), m.put([]byte("file b in a child"))
	tree := putTree(t, m, []*repb.FileNode{fileNode("a", a)}, []*repb.FileNode{fileNode("b", b)})
	action := putResult(t, m, "action", &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "out", TreeDigest: tree.Proto()}}})
	l := actionresult.NewLoader(m, actionresult.LoaderOptions{Generation: m.generation})
	if _, _, err := l.Load(ctx, action); err != nil {
		t.Fatalf("complete result: %v", err)
	}
	m.remove(b)
	_, _, err := l.Load(ctx, action)
	inc, ok := errors.AsType[*actionresult.Incomplete](err)
	if !ok || !errors.Is(err, cas.ErrNotFound) || inc.Missing != b || !strings.Contains(err.Error(), `file in output directory "out"`) {
		t.Fatalf("result with a file of its tree evicted: %v; want an Incomplete miss naming output directory \"out\" and %s", err, b)
	}
	if s := l.Stats(); s.Served != 1 || s.Incomplete != 1 {
		t.Errorf("stats %+v; want 1 served, 1 incomplete", s)
	}
}

// A Tree found complete is not read or looked up again while the store's
// generation stays: a hit then costs one FindMissing, as before Trees
// were checked. Once the generation moves, the next hit reads it again.
// Without a generation every hit reads it.
func TestLoaderRemembersCompleteTreesUntilAnEviction(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	a, other := m.put([]byte("file a")), m.put([]byte("unrelated"))
	tree := putTree(t, m, []*repb.FileNode{fileNode("a", a)}, nil)
	action := putResult(t, m, "action", &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "out", TreeDigest: tree.Proto()}}})
	load := func(l *actionresult.Loader, wantReads, wantFinds int) {
		t.Helper()
		r0, f0 := m.calls()
		if _, _, err := l.Load(ctx, action); err != nil {
			t.Fatal(err)
		}
		r1, f1 := m.calls()
		if r1-r0 != wantReads || f1-f0 != wantFinds {
			t.Errorf("a hit read %d blobs and made %d FindMissing calls; want %d and %d", r1-r0, f1-f0, wantReads, wantFinds)
		}
	}
	l := actionresult.NewLoader(m, actionresult.LoaderOptions{Generation: m.generation})
	load(l, 1, 2) // first: the tree read and its files looked up
	load(l, 0, 1) // remembered
	load(l, 0, 1)
	m.remove(other) // an eviction: anything may be gone
	load(l, 1, 2)
	load(l, 0, 1)
	if s := l.Stats(); s.TreesRead != 2 || s.TreesRemembered != 3 || s.TreesKnown != 1 {
		t.Errorf("stats %+v; want 2 trees read, 3 remembered, 1 known", s)
	}

	plain := actionresult.NewLoader(m, actionresult.LoaderOptions{})
	load(plain, 1, 2)
	load(plain, 1, 2)
}

// A Tree that does not parse, names a malformed digest, or is larger than
// the Loader reads is the entry's fault: a miss, Unservable (logged), and
// never remembered.
func TestLoaderRefusesBadTrees(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	notTree := m.put([]byte("\xff\xff not a protobuf"))
	badDigest, err := proto.Marshal(&repb.Tree{Root: &repb.Directory{Files: []*repb.FileNode{{Name: "x", Digest: &repb.Digest{Hash: "zz", SizeBytes: 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	bad := m.put(badDigest)
	big := putTree(t, m, []*repb.FileNode{fileNode("a", m.put([]byte("a")))}, nil)
	for _, tc := range []struct {
		tree cas.Digest
		max  int64
		want string
	}{
		{notTree, 0, "not a Tree message"},
		{bad, 0, "bad Tree"},
		{big, big.Size - 1, "more than this server checks"},
	} {
		action := putResult(t, m, tc.want, &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "d", TreeDigest: tc.tree.Proto()}}})
		l := actionresult.NewLoader(m, actionresult.LoaderOptions{Generation: m.generation, MaxTreeBytes: tc.max})
		_, _, err := l.Load(ctx, action)
		if u, ok := errors.AsType[*actionresult.Unservable](err); !ok || !errors.Is(err, cas.ErrNotFound) || !strings.Contains(u.Error()+u.Reason, tc.want) {
			t.Errorf("tree %q: %v; want an Unservable miss saying %q", tc.want, err, tc.want)
		}
		if s := l.Stats(); s.TreesKnown != 0 {
			t.Errorf("tree %q remembered", tc.want)
		}
	}
}

// The root Directory of an output directory, where the result names one,
// must be stored too.
func TestLoaderChecksRootDirectoryDigest(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	tree := putTree(t, m, nil, nil)
	root := cas.DigestOf([]byte("a root Directory never stored"))
	action := putResult(t, m, "a", &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "d", TreeDigest: tree.Proto(), RootDirectoryDigest: root.Proto()}}})
	_, _, err := actionresult.NewLoader(m, actionresult.LoaderOptions{}).Load(ctx, action)
	if inc, ok := errors.AsType[*actionresult.Incomplete](err); !ok || inc.Missing != root {
		t.Fatalf("root Directory missing: %v; want Incomplete naming %s", err, root)
	}
}

func TestTreeMemoryIsBoundedAndKeyedByGeneration(t *testing.T) {
	mem := actionresult.NewTreeMemory(4)
	var ds []cas.Digest
	for i := range 10 {
		d := cas.DigestOf([]byte{byte(i)})
		ds = append(ds, d)
		mem.Remember(d, 7)
	}
	if n := mem.Len(); n != 4 {
		t.Fatalf("holds %d trees; want its capacity, 4", n)
	}
	known := 0
	for _, d := range ds {
		if mem.Complete(d, 7) {
			known++
		}
		if mem.Complete(d, 8) {
			t.Fatalf("tree %s known complete at a generation it was not checked at", d)
		}
	}
	if known != 4 {
		t.Fatalf("%d trees known; want 4", known)
	}
	mem.Remember(ds[9], 8) // a tree checked again replaces its record
	if !mem.Complete(ds[9], 8) || mem.Complete(ds[9], 7) || mem.Len() > 4 {
		t.Fatal("a tree checked again at a new generation is not known at it alone")
	}
}

// A Tree found lacking a file is not read again while that file is still
// missing: a repeated request for its result costs a lookup of the file,
// with or without a generation. Once the file is stored, the Tree is read
// again and the result served.
func TestLoaderRemembersWhatAnIncompleteTreeLacks(t *testing.T) {
	ctx := context.Background()
	for _, withGeneration := range []bool{true, false} {
		m := newMemStore()
		a := m.put([]byte("file a"))
		bData := []byte("file b, not stored yet")
		b := cas.DigestOf(bData)
		tree := putTree(t, m, []*repb.FileNode{fileNode("a", a), fileNode("b", b)}, nil)
		action := putResult(t, m, "action", &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "out", TreeDigest: tree.Proto()}}})
		var opts actionresult.LoaderOptions
		if withGeneration {
			opts.Generation = m.generation
		}
		l := actionresult.NewLoader(m, opts)
		load := func(wantReads int, wantMissing cas.Digest) {
			t.Helper()
			r0, _ := m.calls()
			_, _, err := l.Load(ctx, action)
			r1, _ := m.calls()
			inc, _ := errors.AsType[*actionresult.Incomplete](err)
			switch {
			case wantMissing != (cas.Digest{}) && (inc == nil || inc.Missing != wantMissing || !strings.Contains(err.Error(), `output directory "out"`)):
				t.Errorf("generation %v: %v; want an Incomplete miss naming output directory \"out\" and %s", withGeneration, err, wantMissing)
			case wantMissing == (cas.Digest{}) && err != nil:
				t.Errorf("generation %v: %v; want a hit", withGeneration, err)
			}
			if r1-r0 != wantReads {
				t.Errorf("generation %v: the request read %d blobs; want %d", withGeneration, r1-r0, wantReads)
			}
		}
		load(1, b) // read, found lacking b
		load(0, b) // b still missing: not read again
		load(0, b)
		m.put(bData)
		load(1, cas.Digest{}) // b stored: read again, complete
	}
}

// BenchmarkLoadManyTrees is one result naming 20,000 distinct Trees of one
// file each (a 1.6 MB result), every Tree read and checked on each
// request, as after an eviction: the check is linear in the Trees read.
func BenchmarkLoadManyTrees(b *testing.B) {
	ctx := context.Background()
	m := newMemStore()
	ar := &repb.ActionResult{}
	for i := range 20_000 {
		f := m.put(fmt.Appendf(nil, "file %d", i))
		tree := putTree(b, m, []*repb.FileNode{fileNode("f", f)}, nil)
		ar.OutputDirectories = append(ar.OutputDirectories, &repb.OutputDirectory{Path: fmt.Sprintf("out/%d", i), TreeDigest: tree.Proto()})
	}
	action := putResult(b, m, "action", ar)
	l := actionresult.NewLoader(m, actionresult.LoaderOptions{})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := l.Load(ctx, action); err != nil {
			b.Fatal(err)
		}
	}
}
