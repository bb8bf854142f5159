package cas_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportsRunOneWay holds the cache's packages to their fences (see
// each package's doc and DEVELOPERS.md): which of the cache's packages each
// may import, in its non-test code. A protocol never reaches into a
// storage, a storage never into a protocol, and the leaves know no store.
func TestImportsRunOneWay(t *testing.T) {
	const mod = "github.com/membuf/membuf/cas"
	allowed := map[string][]string{
		".":             {},
		"zstdseek":      {},
		"fastcdc":       {},
		"access":        {mod},
		"actionresult":  {mod},
		"disk":          {mod, mod + "/zstdseek", mod + "/disk/packfile", mod + "/disk/zstdfile", mod + "/disk/vfs", mod + "/disk/files", mod + "/disk/packs", mod + "/disk/packindex", mod + "/disk/integrity", mod + "/disk/groupcommit", mod + "/disk/pace", mod + "/disk/ages", mod + "/disk/unnamed", mod + "/disk/index", mod + "/disk/checkpoint"},
		"disk/packfile": {},
		"disk/zstdfile": {mod, mod + "/zstdseek", mod + "/disk/vfs"},
		"reapi":         {mod, mod + "/access", mod + "/actionresult", mod + "/zstdseek", mod + "/reapi/asset", mod + "/reapi/chunking", mod + "/reapi/internal/rpcstatus", mod + "/reapi/internal/upload"},
		// The services reapi registers from packages of their own, and the
		// pieces they share with it: never reapi itself.
		"reapi/asset":              {mod, mod + "/access", mod + "/reapi/internal/rpcstatus", mod + "/reapi/internal/upload"},
		"reapi/chunking":           {mod, mod + "/access", mod + "/fastcdc", mod + "/reapi/internal/rpcstatus"},
		"reapi/internal/rpcstatus": {mod, mod + "/reapi/internal/upload"},
		"reapi/internal/upload":    {mod, mod + "/zstdseek"},
		// The tests' harness of reapi's packages: a Server on a disk store.
		"reapi/internal/reapitest": {mod, mod + "/disk", mod + "/reapi"},
		"httpcache":                {mod, mod + "/access", mod + "/actionresult"},
		// The access log knows requests and who sent them, no protocol's
		// package and no store.
		"accesslog": {mod + "/access"},
		// The tier machinery knows no backend and no local store but
		// through their interfaces; a backend knows the tier's contract
		// and nothing else of the cache.
		"tier":             {mod, mod + "/tier/existence", mod + "/tier/acbudget", mod + "/tier/uploadmem", mod + "/tier/chunkstream"},
		"tier/existence":   {mod},
		"tier/acbudget":    {},
		"tier/uploadmem":   {mod},
		"tier/chunkstream": {mod},
		// Test support: a backend behind a real tier on a real disk.
		"tier/backendtest": {mod, mod + "/tier", mod + "/disk", mod + "/internal/testblob"},
		"backend/s3":       {mod, mod + "/tier", mod + "/backend/internal/objstore", mod + "/internal/fanout"},
		// Packs in any object store's bucket, over the store's own
		// backend and Bucket: no store's client.
		"backend/packed": {mod, mod + "/tier", mod + "/internal/fanout", mod + "/backend/packed/snapshot", mod + "/backend/packed/packtable"},
		// The snapshots' format, and the records' table: neither knows
		// the other nor packed.
		"backend/packed/snapshot":  {},
		"backend/packed/packtable": {mod + "/internal/offheap"},
		// The bucket's layout (packs or one object each), read and
		// recorded at start, and the backend over it.
		"backend/layout": {mod, mod + "/tier", mod + "/backend/packed"},
		// Test support: the suite every packed.Bucket passes.
		"backend/packed/packedtest": {mod, mod + "/backend/packed"},
		"storagetest":               {mod, mod + "/internal/testblob"},

		// The shared tier's backends on upstream caches, and what they
		// share: never a store or a protocol.
		"backend/grpcupstream":      {mod, mod + "/tier", mod + "/actionresult", mod + "/backend/internal/upstream", mod + "/internal/fanout"},
		"backend/httpupstream":      {mod, mod + "/tier", mod + "/backend/internal/upstream", mod + "/internal/fanout"},
		"backend/internal/upstream": {},
		// The object stores' backends (modules of their own, for their
		// SDKs) and what they share.
		"backend/gcs":                   {mod, mod + "/tier", mod + "/backend/internal/objstore", mod + "/internal/fanout"},
		"backend/azure":                 {mod, mod + "/tier", mod + "/backend/internal/objstore", mod + "/internal/fanout"},
		"backend/internal/objstore":     {mod, mod + "/tier"},
		"backend/internal/upstreamtest": {mod, mod + "/access", mod + "/access/accesstest", mod + "/tier"},

		// The disk store's subpackages: none imports the store.
		"disk/vfs":         {},
		"internal/offheap": {},
		"internal/fanout":  {},
		"disk/groupcommit": {},
		"disk/pace":        {},
		"disk/unnamed":     {mod},
		"disk/ages":        {},
		"disk/packindex":   {mod, mod + "/disk/packfile", mod + "/disk/vfs", mod + "/internal/offheap"},
		"disk/integrity":   {mod, mod + "/zstdseek", mod + "/disk/packfile", mod + "/disk/zstdfile", mod + "/disk/vfs"},
		"disk/files":       {mod, mod + "/zstdseek", mod + "/disk/vfs", mod + "/disk/integrity", mod + "/disk/zstdfile"},
		"disk/packs":       {mod, mod + "/zstdseek", mod + "/disk/vfs", mod + "/disk/packfile", mod + "/disk/integrity", mod + "/disk/zstdfile"},
		"disk/index":       {mod, mod + "/disk/ages", mod + "/disk/packfile", mod + "/disk/packindex", mod + "/disk/packs"},
		"disk/checkpoint":  {mod + "/disk/index", mod + "/disk/packindex", mod + "/disk/packs", mod + "/disk/vfs"},
	}
	for dir, may := range allowed {
		pkg, err := build.ImportDir(filepath.FromSlash(dir), 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range pkg.Imports {
			if (imp == mod || strings.HasPrefix(imp, mod+"/")) && !slices.Contains(may, imp) {
				t.Errorf("cas/%s imports %s; it may import only %v of the cache's packages", dir, imp, may)
			}
		}
	}
}
