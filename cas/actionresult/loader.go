package actionresult

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxTreeBytes bounds the Tree message a Loader reads to check an
// output directory: a Tree of this size lists some hundred thousand
// files.
const DefaultMaxTreeBytes = 16 << 20

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	// Generation returns the store's eviction generation: a number that
	// moves whenever a blob may have left the store (disk.Store's
	// EvictionGeneration). While it stays, a Tree found complete is
	// remembered as complete (Trees). nil: the store offers none, and
	// every output directory's Tree is read and its files looked up on
	// every hit.
	Generation func() uint64
	// Trees remembers the Trees found complete (with a Generation) and
	// those found lacking a file; nil: a TreeMemory of
	// DefaultRememberedTrees of the Loader's own.
	Trees *TreeMemory
	// MaxTreeBytes bounds an output directory's Tree message read to
	// check it; a larger one makes its result a miss, logged (Unservable).
	// 0 means DefaultMaxTreeBytes.
	MaxTreeBytes int64
}

// LoaderStats are a Loader's counters since it was made.
type LoaderStats struct {
	Served     int64 // results served, complete
	Incomplete int64 // results not served: a blob they name is not stored (Incomplete)
	// TreesRead counts the output directories' Trees read, parsed and
	// their files looked up; TreesRemembered, those a hit skipped because
	// TreeMemory knew them complete at the current generation.
	TreesRead, TreesRemembered int64
	TreesKnown                 int // Trees the memory holds now
}

// A Loader serves stored action results whole or not at all: Load returns
// one only if every blob it names is in the CAS, the files of its output
// directories' Trees included. It is shared by the protocols (gRPC's
// GetActionResult, the HTTP cache's /ac/ GET) over one store. Safe for
// concurrent use.
type Loader struct {
	store      cas.Storage
	generation func() uint64 // nil: never remember
	trees      *TreeMemory
	maxTree    int64

	served, incomplete, treesRead, treesRemembered atomic.Int64
}

// NewLoader returns a Loader over store.
func NewLoader(store cas.Storage, opts LoaderOptions) *Loader {
	l := &Loader{store: store, generation: opts.Generation, trees: opts.Trees, maxTree: opts.MaxTreeBytes}
	if l.maxTree <= 0 {
		l.maxTree = DefaultMaxTreeBytes
	}
	if l.trees == nil {
		l.trees = NewTreeMemory(0)
	}
	return l
}

// Stats returns the Loader's counters.
func (l *Loader) Stats() LoaderStats {
	s := LoaderStats{
		Served: l.served.Load(), Incomplete: l.incomplete.Load(),
		TreesRead: l.treesRead.Load(), TreesRemembered: l.treesRemembered.Load(),
	}
	s.TreesKnown = l.trees.Len()
	return s
}

// Load returns the action result stored for the action d, with its stored
// bytes, if it may be served: it parses, its output paths are safe, and
// every blob it names is in the store: output files, stdout and stderr,
// each output directory's Tree and root Directory, and every file of every
// directory in each Tree. One FindMissing looks up the first kind, which
// marks them recently used, and a second the files of the Trees not known
// complete (TreeMemory): a hit whose Trees were all checked since the
// last eviction costs no parse and no second lookup. Anything else is an
// error wrapping cas.ErrNotFound that says why: an *Incomplete for a
// missing blob, an *Unservable if it is the stored entry's fault (or its
// Tree's); or the store's own error.
func (l *Loader) Load(ctx context.Context, d cas.Digest) (*repb.ActionResult, []byte, error) {
	return l.LoadFrom(ctx, l.store, d)
}

// LoadFrom is Load of the result ac keeps for d (an instance's action
// cache over the Loader's store: its own age limit), its blobs looked up
// in the Loader's store.
func (l *Loader) LoadFrom(ctx context.Context, ac cas.ActionCache, d cas.Digest) (*repb.ActionResult, []byte, error) {
	data, err := ac.GetActionResult(ctx, d, cas.ClientLookup)
	if err != nil {
		return nil, nil, err
	}
	ar := &repb.ActionResult{}
	if err := proto.Unmarshal(data, ar); err != nil {
		return nil, nil, &Unservable{Action: d, Reason: "stored entry is unreadable", Cause: err}
	}
	if err := checkOutputPaths(ar); err != nil {
		// Stored before paths were checked: a client must not restore it.
		return nil, nil, &Unservable{Action: d, Reason: "stored entry has an unsafe output path", Cause: err}
	}
	// Read before any lookup: an eviction during the check leaves what it
	// remembers stale at once.
	var gen uint64
	if l.generation != nil {
		gen = l.generation()
	}
	var refs []outputRef
	var ods []cas.Digest
	for ref := range outputs(ar) {
		od, err := cas.ParseDigestFor(d.Function, ref.digest)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: action result for %s: its output %s has a bad digest: %v", cas.ErrNotFound, d, ref, err)
		}
		refs, ods = append(refs, ref), append(ods, od)
	}
	missing, err := l.store.FindMissing(ctx, ods, cas.ServerCheck)
	if err != nil {
		return nil, nil, fmt.Errorf("action result for %s: checking its outputs: %w", d, err)
	}
	if len(missing) > 0 {
		ref := refs[slices.Index(ods, missing[0])]
		return nil, nil, l.isIncomplete(&Incomplete{Action: d, Output: ref.String(), Missing: missing[0]})
	}
	if err := l.checkTrees(ctx, d, ar, gen); err != nil {
		return nil, nil, err
	}
	l.served.Add(1)
	return ar, data, nil
}

// isIncomplete counts err, an *Incomplete, and returns it.
func (l *Loader) isIncomplete(err *Incomplete) error {
	l.incomplete.Add(1)
	return err
}

// checkTrees looks up every file of the Trees of ar's output directories
// not known complete at gen, each Tree read once, all the files in one
// FindMissing, and remembers those Trees complete if they are. A Tree
// found incomplete before is not read again while the file it lacked is
// still missing: one lookup of that file answers for it.
func (l *Loader) checkTrees(ctx context.Context, action cas.Digest, ar *repb.ActionResult, gen uint64) error {
	var toRead []treeRef
	seen := make(map[cas.Digest]bool, len(ar.OutputDirectories)) // a Tree shared by several directories is read once
	var lacked []cas.Digest                                      // the files remembered missing, one per Tree, in toRead's order
	var lacking []treeRef
	for _, dir := range ar.OutputDirectories {
		td, _ := cas.ParseDigestFor(action.Function, dir.TreeDigest) // checked by Load
		if seen[td] {
			continue
		}
		seen[td] = true
		if l.generation != nil && l.trees.Complete(td, gen) {
			l.treesRemembered.Add(1)
			continue
		}
		ref := treeRef{path: dir.Path, tree: td}
		if m, ok := l.trees.Lacks(td); ok {
			lacked, lacking = append(lacked, m), append(lacking, ref)
			continue
		}
		toRead = append(toRead, ref)
	}
	if len(lacked) > 0 {
		missing, err := l.store.FindMissing(ctx, lacked, cas.ServerCheck)
		if err != nil {
			return fmt.Errorf("action result for %s: checking its output directories' files: %w", action, err)
		}
		if len(missing) > 0 {
			ref := lacking[slices.Index(lacked, missing[0])]
			return l.isIncomplete(&Incomplete{Action: action, Output: fmt.Sprintf("file in output directory %q", cas.Clip(ref.path)), Missing: missing[0]})
		}
		// Every file they lacked is stored now: read them again.
		toRead = append(toRead, lacking...)
	}
	if len(toRead) == 0 {
		return nil
	}
	var files []cas.Digest // the Trees' files, in order
	var owners []int       // the index in toRead of each file's Tree
	for i, ref := range toRead {
		tree, err := l.readTree(ctx, action, ref.path, ref.tree)
		if err != nil {
			return err
		}
		n := len(files)
		if files, err = treeFiles(tree, action.Function, files); err != nil {
			return &Unservable{Action: action, Reason: fmt.Sprintf("output directory %q has a bad Tree", cas.Clip(ref.path)), Cause: err}
		}
		for range len(files) - n {
			owners = append(owners, i)
		}
	}
	l.treesRead.Add(int64(len(toRead)))
	missing, err := l.store.FindMissing(ctx, files, cas.ServerCheck)
	if err != nil {
		return fmt.Errorf("action result for %s: checking its output directories' files: %w", action, err)
	}
	if len(missing) > 0 {
		// FindMissing answers in the order asked: one pass pairs each
		// missing file with its Tree.
		var first treeRef
		for i, j := 0, 0; i < len(files) && j < len(missing); i++ {
			if files[i] != missing[j] {
				continue
			}
			ref := toRead[owners[i]]
			if j == 0 {
				first = ref
			}
			l.trees.RememberLacking(ref.tree, missing[j])
			j++
		}
		return l.isIncomplete(&Incomplete{Action: action, Output: fmt.Sprintf("file in output directory %q", cas.Clip(first.path)), Missing: missing[0]})
	}
	if l.generation != nil {
		for _, ref := range toRead {
			l.trees.Remember(ref.tree, gen)
		}
	}
	return nil
}

// treeRef is an output directory's Tree, and the directory's path.
type treeRef struct {
	path string
	tree cas.Digest
}

// readTree reads and parses the Tree td of output directory path.
func (l *Loader) readTree(ctx context.Context, action cas.Digest, path string, td cas.Digest) (*repb.Tree, error) {
	if td.Size > l.maxTree {
		return nil, &Unservable{Action: action, Reason: fmt.Sprintf("output directory %q has a Tree of %d bytes, more than this server checks (%d)", cas.Clip(path), td.Size, l.maxTree)}
	}
	data, err := cas.ReadAll(ctx, l.store, td)
	if errors.Is(err, cas.ErrNotFound) {
		// Evicted since the FindMissing that found it.
		return nil, l.isIncomplete(&Incomplete{Action: action, Output: outputRef{kind: "output directory", path: path}.String(), Missing: td})
	}
	if err != nil {
		return nil, fmt.Errorf("action result for %s: reading output directory %q's tree: %w", action, cas.Clip(path), err)
	}
	tree := &repb.Tree{}
	if err := proto.Unmarshal(data, tree); err != nil {
		return nil, &Unservable{Action: action, Reason: fmt.Sprintf("output directory %q's tree is not a Tree message", cas.Clip(path)), Cause: err}
	}
	return tree, nil
}

// treeFiles appends to files the digests of the files of every directory
// of tree, root and children; a malformed one is an error naming it.
func treeFiles(tree *repb.Tree, f cas.Function, files []cas.Digest) ([]cas.Digest, error) {
	add := func(dir *repb.Directory) error {
		for _, file := range dir.GetFiles() {
			fd, err := cas.ParseDigestFor(f, file.Digest)
			if err != nil {
				return fmt.Errorf("file %q: %w", cas.Clip(file.Name), err)
			}
			files = append(files, fd)
		}
		return nil
	}
	if err := add(tree.Root); err != nil {
		return nil, err
	}
	for _, child := range tree.Children {
		if err := add(child); err != nil {
			return nil, err
		}
	}
	return files, nil
}
