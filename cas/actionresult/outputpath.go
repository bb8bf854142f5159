package actionresult

import (
	"errors"
	"fmt"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
)

// checkOutputPath checks an output path of an ActionResult: a client that
// restores outputs writes them where the result says, so a path that leaves
// the client's working directory ("../../etc/passwd", "/etc/passwd") would
// have it write anywhere it can. remote_execution.proto says output paths
// are relative, with '/' as the separator. Accepted: one or more components
// separated by single slashes, none of them empty, "." or "..", and no
// backslash (a Windows client takes it for a separator) or NUL (no
// filesystem takes it). emptyOK accepts "" (an output directory may be the
// whole working directory).
func checkOutputPath(p string, emptyOK bool) error {
	if p == "" {
		if emptyOK {
			return nil
		}
		return errors.New("path is empty")
	}
	if p[0] == '/' {
		return errors.New("path is absolute; output paths are relative to the working directory")
	}
	if i := strings.IndexAny(p, "\\\x00"); i >= 0 {
		if p[i] == 0 {
			return errors.New("path contains a NUL byte")
		}
		return errors.New(`path contains a backslash, which a Windows client takes for a separator`)
	}
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "":
			return errors.New("path has an empty component (a doubled or trailing slash)")
		case ".", "..":
			return fmt.Errorf("path has a %q component", c)
		}
	}
	return nil
}

// checkOutputPaths checks every output path of ar (files, directories and
// symlinks) and names the first bad one.
func checkOutputPaths(ar *repb.ActionResult) error {
	check := func(kind, p string, emptyOK bool) error {
		if err := checkOutputPath(p, emptyOK); err != nil {
			return fmt.Errorf("%s %q: %w", kind, cas.Clip(p), err)
		}
		return nil
	}
	for _, f := range ar.OutputFiles {
		if err := check("output file", f.Path, false); err != nil {
			return err
		}
	}
	for _, d := range ar.OutputDirectories {
		if err := check("output directory", d.Path, true); err != nil {
			return err
		}
	}
	for _, s := range ar.OutputSymlinks {
		if err := check("output symlink", s.Path, false); err != nil {
			return err
		}
	}
	// Deprecated in REAPI v2.1 in favour of OutputSymlinks, but older
	// clients still send them, and a path that escapes is as bad there.
	//lint:ignore SA1019 checked because old clients still fill it in
	for _, s := range ar.OutputFileSymlinks {
		if err := check("output file symlink", s.Path, false); err != nil {
			return err
		}
	}
	//lint:ignore SA1019 checked because old clients still fill it in
	for _, s := range ar.OutputDirectorySymlinks {
		if err := check("output directory symlink", s.Path, false); err != nil {
			return err
		}
	}
	return nil
}
