package reapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/reapi/internal/rpcstatus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// treeWalk reads the Directory tree under a root breadth first, each
// distinct directory once, one directory at a time as GetTree needs them:
// a page costs the reads of its own directories, not of the tree before it.
// Directories missing from the CAS, too large to be one, or not parsing as
// one are left out with what they contain.
type treeWalk struct {
	root    cas.Digest
	queue   []cas.Digest // every directory found so far, in breadth-first order
	next    int          // queue[next:] are still to be read
	seen    map[cas.Digest]struct{}
	emitted int // directories handed out so far: the position
}

func newTreeWalk(root cas.Digest) *treeWalk {
	return &treeWalk{root: root, queue: []cas.Digest{root}, seen: map[cas.Digest]struct{}{root: {}}}
}

// size is how many digests the walk holds, for the cursors' memory bound.
func (w *treeWalk) size() int { return len(w.queue) }

// nextDir returns the next directory, or nil at the end of the tree. The
// root must be present and a Directory (NOT_FOUND, INVALID_ARGUMENT); a
// malformed digest anywhere in the tree is INVALID_ARGUMENT.
func (w *treeWalk) nextDir(ctx context.Context, c *casService) (*repb.Directory, error) {
	for w.next < len(w.queue) {
		d := w.queue[w.next]
		w.next++
		isRoot := w.next == 1
		if d.Size > maxDirectoryBytes {
			if isRoot {
				return nil, status.Errorf(codes.InvalidArgument, "tree root %s is larger than a Directory this server reads (%d bytes)", d, maxDirectoryBytes)
			}
			c.s.log.Warn("GetTree: blob too large for a Directory; left out", "digest", d.String())
			continue
		}
		data, err := cas.ReadAll(ctx, c.s.store, d)
		if err != nil {
			if isRoot {
				return nil, rpcstatus.Store(err, "tree root "+d.String())
			}
			if ctx.Err() != nil {
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			continue // missing: omitted, as the spec says
		}
		dir := &repb.Directory{}
		if err := proto.Unmarshal(data, dir); err != nil {
			if isRoot {
				return nil, status.Errorf(codes.InvalidArgument, "tree root %s is not a Directory message: %v", d, err)
			}
			c.s.log.Warn("GetTree: blob is not a Directory; left out", "digest", d.String(), "err", err)
			continue
		}
		for _, n := range dir.Directories {
			cd, err := cas.ParseDigestFor(d.Function, n.Digest) // a Tree's directories are of its root's function
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "directory %q in the tree: %v", cas.Clip(n.Name), err)
			}
			if _, ok := w.seen[cd]; !ok {
				w.seen[cd] = struct{}{}
				w.queue = append(w.queue, cd)
			}
		}
		w.emitted++
		return dir, nil
	}
	return nil, nil
}

// unread makes the directory nextDir just returned the next one again (it
// did not fit the page, or was only looked at): it is read again then. Its
// children were queued when it was read and stay where they are, so the
// order does not change; holding a digest instead of the Directory keeps
// a kept walk small.
func (w *treeWalk) unread() {
	w.next--
	w.emitted--
}

// Bounds of the walks GetTree keeps between pages. A walk holds about 150
// bytes per directory found; the total bounds what all of them hold
// (about 40 MB), a walk larger than that is not kept (its next page walks
// again from the root), and an idle one is dropped after cursorTTL.
const (
	maxCursorDigests = 1 << 18
	maxCursors       = 64
	cursorTTL        = 5 * time.Minute
)

// treeCursors keeps the walks of paged GetTree calls between pages, named by
// the page tokens handed to their clients. A token is
// "<position>.<cursor id>", or "<position>" alone when the walk was not
// kept; either resumes the walk: from the kept walk in O(page), or, if it
// is gone (dropped, expired, used by an earlier request with the same
// token, or the server restarted), by walking again from the root and
// skipping position directories. The id is random, so a token cannot name
// another client's walk.
type treeCursors struct {
	mu      sync.Mutex
	m       map[string]*cursorEntry
	digests int // sum of size() over m
}

type cursorEntry struct {
	w    *treeWalk
	used time.Time
}

func newTreeCursors() *treeCursors {
	return &treeCursors{m: make(map[string]*cursorEntry)}
}

// parsePageToken splits a page token into its position and cursor id.
func parsePageToken(tok string) (pos int, id string, err error) {
	p, id, _ := strings.Cut(tok, ".")
	pos, err = strconv.Atoi(p)
	if err != nil || pos < 0 || (id != "" && len(id) != 32) {
		return 0, "", fmt.Errorf("page_token %q is not one this server issued", cas.Clip(tok))
	}
	return pos, id, nil
}

// take removes and returns the walk id names if it is for root and stopped
// at pos; nil if there is none.
func (tc *treeCursors) take(id string, root cas.Digest, pos int) *treeWalk {
	if id == "" {
		return nil
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	e := tc.m[id]
	if e == nil || e.w.root != root || e.w.emitted != pos {
		return nil
	}
	delete(tc.m, id)
	tc.digests -= e.w.size()
	return e.w
}

// keep stores w for its next page and returns the token that names it; a
// walk too large to keep gets a token with its position only.
func (tc *treeCursors) keep(w *treeWalk) string {
	pos := strconv.Itoa(w.emitted)
	if w.size() > maxCursorDigests {
		return pos
	}
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	now := time.Now()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	// Drop the expired, then the least recently used, until w fits.
	for k, e := range tc.m {
		if now.Sub(e.used) > cursorTTL {
			tc.dropLocked(k)
		}
	}
	for len(tc.m) >= maxCursors || tc.digests+w.size() > maxCursorDigests {
		oldest := ""
		for k, e := range tc.m {
			if oldest == "" || e.used.Before(tc.m[oldest].used) {
				oldest = k
			}
		}
		tc.dropLocked(oldest)
	}
	tc.m[id] = &cursorEntry{w: w, used: now}
	tc.digests += w.size()
	return pos + "." + id
}

func (tc *treeCursors) dropLocked(id string) {
	tc.digests -= tc.m[id].w.size()
	delete(tc.m, id)
}
