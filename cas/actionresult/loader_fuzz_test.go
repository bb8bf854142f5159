package actionresult_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
	"google.golang.org/protobuf/proto"
)

// script reads a fuzz input a byte at a time, zeros past its end.
type script []byte

func (s *script) next() byte {
	if len(*s) == 0 {
		return 0
	}
	b := (*s)[0]
	*s = (*s)[1:]
	return b
}

const fuzzBlobs = 12 // the blobs outputs and Trees' files are drawn from

// FuzzLoadServesOnlyCompleteResults builds an action result of output
// files and output directories whose Trees draw their files from a few
// blobs, some stored and some not, then removes and restores blobs and
// Trees (a removal moves the store's generation, as an eviction does) and
// loads the result between steps: it must be served exactly when the
// model says every blob it names is stored, whatever the Loader
// remembers.
func FuzzLoadServesOnlyCompleteResults(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 1, 2, 1, 2, 3, 1, 4, 5, 0, 0x45, 0, 0x80, 0})
	f.Add([]byte{0x0f, 0xf0, 0, 2, 2, 1, 1, 1, 2, 2, 3, 0, 0, 0x48, 0, 0xc0, 0, 0xc0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		s := script(in)
		ctx := context.Background()
		m := newMemStore()
		remembers := s.next()&1 == 1
		presence := uint16(s.next()) | uint16(s.next())<<8
		var blobs []cas.Digest
		content := func(i int) []byte { return fmt.Appendf(nil, "blob %d", i) }
		for i := range fuzzBlobs {
			blobs = append(blobs, cas.DigestOf(content(i)))
			if presence&(1<<i) != 0 {
				m.put(content(i))
			}
		}
		pick := func() int { return int(s.next()) % fuzzBlobs }
		files := func(n byte) ([]*repb.FileNode, []int) {
			var nodes []*repb.FileNode
			var idx []int
			for j := range int(n % 4) {
				i := pick()
				nodes, idx = append(nodes, fileNode(fmt.Sprint("f", j), blobs[i])), append(idx, i)
			}
			return nodes, idx
		}
		ar := &repb.ActionResult{}
		var named []int // blobs the result needs, directly or in a Tree
		outFiles, idx := files(s.next())
		for j, n := range outFiles {
			ar.OutputFiles = append(ar.OutputFiles, &repb.OutputFile{Path: fmt.Sprint("out", j), Digest: n.Digest})
		}
		named = append(named, idx...)
		var trees []cas.Digest
		var treeData [][]byte
		treeFiles := map[cas.Digest][]int{}
		for j := range int(s.next() % 4) {
			root, ri := files(s.next())
			tree := &repb.Tree{Root: &repb.Directory{Files: root}}
			tf := ri
			for range int(s.next() % 3) {
				child, ci := files(s.next())
				tree.Children = append(tree.Children, &repb.Directory{Files: child})
				tf = append(tf, ci...)
			}
			data, err := proto.Marshal(tree)
			if err != nil {
				t.Fatal(err)
			}
			d := m.put(data)
			trees, treeData = append(trees, d), append(treeData, data)
			treeFiles[d] = tf
			ar.OutputDirectories = append(ar.OutputDirectories, &repb.OutputDirectory{Path: fmt.Sprint("dir", j), TreeDigest: d.Proto()})
		}
		action := putResult(t, m, "fuzzed", ar)
		var opts actionresult.LoaderOptions
		if remembers {
			opts.Generation = m.generation
			opts.Trees = actionresult.NewTreeMemory(2)
		}
		l := actionresult.NewLoader(m, opts)
		complete := func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, i := range named {
				if !m.has(blobs[i]) {
					return false
				}
			}
			for _, td := range trees {
				if !m.has(td) {
					return false
				}
				for _, i := range treeFiles[td] {
					if !m.has(blobs[i]) {
						return false
					}
				}
			}
			return true
		}
		check := func(step int) {
			_, _, err := l.Load(ctx, action)
			want := complete()
			switch {
			case want && err != nil:
				t.Fatalf("step %d: a complete result not served: %v", step, err)
			case !want && err == nil:
				t.Fatalf("step %d: an incomplete result served", step)
			case !want && !errors.Is(err, cas.ErrNotFound):
				t.Fatalf("step %d: an incomplete result is %v; want a miss", step, err)
			}
			if _, ok := errors.AsType[*actionresult.Incomplete](err); !want && !ok {
				t.Fatalf("step %d: %v; want an Incomplete", step, err)
			}
		}
		check(0)
		for step := 1; len(s) > 0 && step < 64; step++ {
			op := s.next()
			arg := int(s.next())
			switch op % 4 {
			case 1:
				m.remove(blobs[arg%fuzzBlobs])
			case 2:
				m.put(content(arg % fuzzBlobs))
			case 3:
				if len(trees) > 0 {
					if i := arg % len(trees); arg&0x80 != 0 {
						m.put(treeData[i])
					} else {
						m.remove(trees[i])
					}
				}
			}
			check(step)
		}
	})
}
