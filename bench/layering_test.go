package bench_test

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportsRunOneWay holds bench's packages to the order doc.go gives:
// the command imports the workloads; the workloads import blobclient,
// measure and report; measure imports report; report and blobclient
// import none of bench; no workload imports another. Every package here must have a rule, so that a new one
// is placed on purpose.
func TestImportsRunOneWay(t *testing.T) {
	const mod = "github.com/membuf/membuf/bench"
	shared := []string{mod + "/blobclient", mod + "/measure", mod + "/report"}
	allowed := map[string][]string{
		".":                 {mod + "/blobclient", mod + "/blobs", mod + "/buildmix", mod + "/echo", mod + "/fill", mod + "/measure", mod + "/report"},
		"report":            {},
		"report/reporttest": {mod + "/report"},
		"measure":           {mod + "/report"},
		"blobclient":        {},
		"blobs":             shared,
		"echo":              {mod + "/measure", mod + "/report"},
		"buildmix":          shared,
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
			t.Errorf("bench/%s has no rule for what it may import: add one here", dir)
			return nil
		}
		for _, imp := range pkg.Imports {
			if (imp == mod || strings.HasPrefix(imp, mod+"/")) && !slices.Contains(may, imp) {
				t.Errorf("bench/%s imports %s; it may import only %v of bench's packages", dir, imp, may)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
