package loadgen_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportsRunOneWay holds loadgen's packages to the order doc.go gives:
// the workloads import blobclient, measure and report; measure imports
// report; report and blobclient import none of loadgen; no workload
// imports another. Every package here must have a rule, so that a new one
// is placed on purpose.
func TestImportsRunOneWay(t *testing.T) {
	const mod = "github.com/membuf/membuf/cmd/membuf/internal/loadgen"
	shared := []string{mod + "/blobclient", mod + "/measure", mod + "/report"}
	allowed := map[string][]string{
		".":                 {},
		"report":            {},
		"report/reporttest": {mod + "/report"},
		"measure":           {mod + "/report"},
		"blobclient":        {},
		"blobs":             shared,
		"echo":              {mod + "/measure", mod + "/report"},
		"build":             shared,
		"fill":              shared,
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		pkg, err := build.ImportDir(path, 0)
		if _, none := err.(*build.NoGoError); none {
			return nil
		}
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(path)
		may, ok := allowed[dir]
		if !ok {
			t.Errorf("loadgen/%s has no rule for what it may import: add one here", dir)
			return nil
		}
		for _, imp := range pkg.Imports {
			if (imp == mod || strings.HasPrefix(imp, mod+"/")) && !slices.Contains(may, imp) {
				t.Errorf("loadgen/%s imports %s; it may import only %v of loadgen's packages", dir, imp, may)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
