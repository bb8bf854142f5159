package actionresult

import (
	"sync"

	"github.com/membuf/membuf/cas"
)

// DefaultRememberedTrees is how many Trees a TreeMemory of capacity 0
// holds: at about 100 bytes a Tree, some 6 MiB.
const DefaultRememberedTrees = 1 << 16

// TreeMemory remembers which Trees (output directories' Tree messages, by
// digest) were found complete, every file of every directory in the CAS,
// and as of which eviction generation: while the store's generation has
// not moved, nothing was removed, so the Tree is still complete and need
// not be read, parsed or looked up again. It also remembers, of Trees
// found incomplete, a file each lacked: while that file is missing the
// Tree is still incomplete, whatever the generation (an eviction does not
// store a file), so a lookup of it answers without reading the Tree. It
// holds at most its capacity of each; past it, a Tree remembered is
// forgotten at random (map order), which costs a later hit of it one
// parse. Safe for concurrent use.
type TreeMemory struct {
	mu       sync.Mutex
	capacity int
	trees    map[cas.Digest]uint64     // tree digest -> the generation it was found complete at
	lacking  map[cas.Digest]cas.Digest // tree digest -> a file it lacked when last read
}

// NewTreeMemory returns a TreeMemory of at most capacity Trees of each
// kind; 0 means DefaultRememberedTrees.
func NewTreeMemory(capacity int) *TreeMemory {
	if capacity <= 0 {
		capacity = DefaultRememberedTrees
	}
	return &TreeMemory{capacity: capacity, trees: make(map[cas.Digest]uint64), lacking: make(map[cas.Digest]cas.Digest)}
}

// Lacks returns the file tree lacked when it was last found incomplete,
// if it was and has not been found complete since.
func (m *TreeMemory) Lacks(tree cas.Digest) (file cas.Digest, ok bool) {
	m.mu.Lock()
	file, ok = m.lacking[tree]
	m.mu.Unlock()
	return file, ok
}

// RememberLacking records that tree was found to lack file.
func (m *TreeMemory) RememberLacking(tree, file cas.Digest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	forgetOneIfFull(m.lacking, tree, m.capacity)
	m.lacking[tree] = file
}

// forgetOneIfFull forgets a key of m at random (map order) if m holds capacity
// keys and key is not one of them.
func forgetOneIfFull[V any](m map[cas.Digest]V, key cas.Digest, capacity int) {
	if _, ok := m[key]; ok || len(m) < capacity {
		return
	}
	for d := range m {
		delete(m, d)
		return
	}
}

// Complete reports whether tree was found complete at generation gen.
func (m *TreeMemory) Complete(tree cas.Digest, gen uint64) bool {
	m.mu.Lock()
	g, ok := m.trees[tree]
	m.mu.Unlock()
	return ok && g == gen
}

// Remember records that tree was found complete at generation gen, read
// before the check began (so an eviction during the check makes the
// record stale at once).
func (m *TreeMemory) Remember(tree cas.Digest, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	forgetOneIfFull(m.trees, tree, m.capacity)
	m.trees[tree] = gen
	delete(m.lacking, tree)
}

// Len returns how many Trees are remembered, complete (current or
// stale) or lacking a file.
func (m *TreeMemory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.trees) + len(m.lacking)
}
