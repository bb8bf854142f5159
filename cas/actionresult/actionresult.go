package actionresult

import (
	"context"
	"errors"
	"fmt"
	"iter"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"google.golang.org/protobuf/proto"
)

// Check reports what would make ar, a result of an action named under
// function f, unsafe to store: a malformed digest (every blob it names is
// one of f's: an action's result names blobs of its own function) or an
// output path that leaves the working directory. The error names the
// output.
func Check(ar *repb.ActionResult, f cas.Function) error {
	if ar == nil {
		return errors.New("action_result is missing")
	}
	for ref := range outputs(ar) {
		if _, err := cas.ParseDigestFor(f, ref.digest); err != nil {
			return fmt.Errorf("action_result %s: %w", ref, err)
		}
	}
	if err := checkOutputPaths(ar); err != nil {
		return fmt.Errorf("action_result %w", err)
	}
	return nil
}

// Marshal serializes ar deterministically, so that the same result stored
// twice is the same bytes (and the same SHA-256 in a shared tier).
func Marshal(ar *repb.ActionResult) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(ar)
}

// Unservable is a stored action result that Load will not serve: it does
// not parse, or it has an unsafe output path. It is a miss (errors.Is
// cas.ErrNotFound) that the server should also log: the store holds
// something no client should be given.
type Unservable struct {
	Action cas.Digest
	Reason string // "stored entry is unreadable", ...
	Cause  error
}

func (e *Unservable) Error() string {
	return fmt.Sprintf("action result for %s: %s", e.Action, e.Reason)
}

// Is makes an Unservable a miss.
func (e *Unservable) Is(target error) bool { return target == cas.ErrNotFound }

func (e *Unservable) Unwrap() error { return e.Cause }

// Load is NewLoader(store, LoaderOptions{}).Load(ctx, d): every Tree is
// read and its files looked up on every call. A server keeps one Loader.
func Load(ctx context.Context, store cas.Storage, d cas.Digest) (*repb.ActionResult, []byte, error) {
	return NewLoader(store, LoaderOptions{}).Load(ctx, d)
}

// outputRef is a CAS blob an ActionResult refers to. Its description is
// formatted only when an error needs it: Load checks every output of every
// cache hit.
type outputRef struct {
	kind   string // "output file", "output directory", "stdout", "stderr"
	path   string
	digest *repb.Digest
}

func (r outputRef) String() string {
	switch r.kind {
	case "output file":
		return fmt.Sprintf("output file %q", cas.Clip(r.path))
	case "output directory":
		return fmt.Sprintf("output directory %q tree", cas.Clip(r.path))
	case "output directory root":
		return fmt.Sprintf("output directory %q root Directory", cas.Clip(r.path))
	}
	return r.kind
}

// outputs yields the CAS blobs an ActionResult refers to directly: output
// files, output directories' Trees (and root Directories where set), and
// stdout and stderr when they are set.
func outputs(ar *repb.ActionResult) iter.Seq[outputRef] {
	return func(yield func(outputRef) bool) {
		for _, f := range ar.OutputFiles {
			if !yield(outputRef{"output file", f.Path, f.Digest}) {
				return
			}
		}
		for _, dir := range ar.OutputDirectories {
			if !yield(outputRef{"output directory", dir.Path, dir.TreeDigest}) {
				return
			}
			if dir.RootDirectoryDigest != nil && !yield(outputRef{"output directory root", dir.Path, dir.RootDirectoryDigest}) {
				return
			}
		}
		if ar.StdoutDigest != nil && !yield(outputRef{"stdout", "", ar.StdoutDigest}) {
			return
		}
		if ar.StderrDigest != nil {
			yield(outputRef{"stderr", "", ar.StderrDigest})
		}
	}
}
