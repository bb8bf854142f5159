package disk

import "github.com/membuf/membuf/cas/disk/index"

// The index's vocabulary, by the names the store's files use.
type (
	entry        = index.Entry
	entryKey     = index.Key
	entryKind    = index.Kind
	commitBatch  = index.Batch
	verification = index.Verification
)

const (
	kindCAS = index.CAS
	kindAC  = index.AC
)
