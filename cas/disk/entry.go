package disk

import (
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/index"
)

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

// casKey is the key of CAS blob d: its function's, so that a blob stored
// under one function is never found under another.
func casKey(d cas.Digest) entryKey { return entryKey{Kind: kindCAS, Fn: d.Function, Hash: d.Hash} }

// acKey is the key of the result of action d.
func acKey(d cas.Digest) entryKey { return entryKey{Kind: kindAC, Fn: d.Function, Hash: d.Hash} }
