package actionresult

import (
	"fmt"

	"github.com/membuf/membuf/cas"
)

// Incomplete is a stored action result that names a blob no longer in
// the CAS: an output file, stdout or stderr, an output directory's Tree,
// a file in one of its directories, or its root Directory. It is a miss
// (errors.Is cas.ErrNotFound): the client runs the action again. Builds
// without the bytes trust a hit to mean every output can be fetched
// later, so a result is served whole or not at all.
type Incomplete struct {
	Action  cas.Digest
	Output  string     // what names the missing blob: `output file "a/b"`, `a file in output directory "d"`, "stdout", ...
	Missing cas.Digest // the first blob found missing
}

func (e *Incomplete) Error() string {
	return fmt.Sprintf("action result for %s is incomplete: its %s (%s) is no longer in the CAS", e.Action, e.Output, e.Missing.Hash)
}

// Is makes an Incomplete a miss.
func (e *Incomplete) Is(target error) bool { return target == cas.ErrNotFound }
