package actionresult

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputPath(t *testing.T) {
	for _, tc := range []struct {
		p       string
		emptyOK bool
		want    string // "" means accepted; otherwise a substring of the error
	}{
		{"out", false, ""},
		{"bazel-out/k8-fastbuild/bin/app", false, ""},
		{"a.b/.c/..d/...", false, ""},
		{"", true, ""},
		{"", false, "empty"},
		{"/etc/passwd", false, "absolute"},
		{"/", true, "absolute"},
		{"../../../etc/passwd", false, `".." component`},
		{"out/../../x", false, `".." component`},
		{"out/..", false, `".." component`},
		{"./out", false, `"." component`},
		{"out/.", false, `"." component`},
		{".", true, `"." component`},
		{"out//x", false, "empty component"},
		{"out/", false, "empty component"},
		{"out\\..\\..\\x", false, "backslash"},
		{"out\x00x", false, "NUL"},
	} {
		err := checkOutputPath(tc.p, tc.emptyOK)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkOutputPath(%q, %v) = %v; want it accepted", tc.p, tc.emptyOK, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkOutputPath(%q, %v) = %v; want an error saying %q", tc.p, tc.emptyOK, err, tc.want)
		}
	}
}

// FuzzCheckOutputPath: whatever checkOutputPath accepts is a clean relative
// path that stays inside the directory it is joined to.
func FuzzCheckOutputPath(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzCheckOutputPath.
	f.Fuzz(func(t *testing.T, p string) {
		if checkOutputPath(p, true) != nil {
			return
		}
		if p == "" {
			return
		}
		if path.Clean(p) != p || path.IsAbs(p) || strings.ContainsAny(p, "\\\x00") {
			t.Fatalf("accepted %q, which is not a clean relative path", p)
		}
		root := "/work/dir"
		if j := filepath.Join(root, p); !strings.HasPrefix(j, root+"/") {
			t.Fatalf("accepted %q, which joined to %s leaves it: %s", p, root, j)
		}
		for c := range strings.SplitSeq(p, "/") {
			if c == ".." {
				t.Fatalf("accepted %q, which has a .. component", p)
			}
		}
	})
}
