package httpcache_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/testenv"
)

// memCache is a Handler over a disk store on a MemFS, called directly
// (no connection): what a request costs the server alone, in syncs and
// allocations, and what a machine crash leaves of it.
type memCache struct {
	t     *testing.T
	fs    *vfs.MemFS
	store *disk.Store
	h     *httpcache.Handler
}

func newMemCache(t *testing.T, fs *vfs.MemFS) *memCache {
	t.Helper()
	store, err := disk.OpenStore("/store", 0, nil, disk.WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpcache.New(store, httpcache.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return &memCache{t: t, fs: fs, store: store, h: h}
}

// serve answers a request made ahead (request), returning its status and
// body.
func (c *memCache) serve(req *http.Request) (int, []byte) {
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func request(method, path string, body []byte) *http.Request {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return httptest.NewRequest(method, path, rd)
}

// puts makes n PUT requests of proto's ("cas", "nx" or "turbo") of size
// bytes each, every one new content under a new hash (toolPath).
func puts(proto string, n, size int, seed byte) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		data := testblob.Pattern(size, seed)
		stamp := uint64(seed)<<32 | uint64(i+1)
		binary.LittleEndian.PutUint64(data, stamp)
		reqs[i] = request("PUT", toolPath(proto, data, stamp), data)
	}
	return reqs
}

// A Turborepo or Nx PUT of a small artifact is one durable commit, as a
// /cas/ PUT of the same size is: as many syncs, not one for the content
// and another for the entry's record. A larger one is still two (its
// content, then the record naming it), which the test shows it counts.
func TestSmallToolPutSyncsAsCAS(t *testing.T) {
	c := newMemCache(t, vfs.NewStrictMem())
	const n = 10
	syncsPerPut := func(proto string, size int, seed byte) float64 {
		reqs := puts(proto, n, size, seed)
		before := c.fs.Syncs()
		for _, req := range reqs {
			if code, body := c.serve(req); code/100 != 2 {
				t.Fatalf("%s PUT of %d bytes: %d %q", proto, size, code, body)
			}
		}
		return float64(c.fs.Syncs()-before) / n
	}
	syncsPerPut("cas", 4<<10, 99) // the first PUTs make the store's first pack segment
	cas := syncsPerPut("cas", 4<<10, 1)
	if cas < 1 {
		t.Fatalf("a /cas/ PUT made %.1f syncs: the store syncs nothing, and the test measures nothing", cas)
	}
	for i, proto := range []string{"nx", "turbo"} {
		if got := syncsPerPut(proto, 4<<10, byte(2+i)); got > cas {
			t.Errorf("a 4 KiB %s PUT made %.1f syncs, a /cas/ PUT %.1f", proto, got, cas)
		}
	}
	if big, casBig := syncsPerPut("nx", 64<<10, 4), syncsPerPut("cas", 64<<10, 5); big != 2*casBig {
		t.Errorf("a 64 KiB Nx PUT made %.1f syncs, a /cas/ PUT %.1f: want two commits, content then record", big, casBig)
	}
}

// A Turborepo or Nx PUT of 4 KiB allocates no more than 1.2 times what a
// /cas/ PUT of the same size does, the store's allocations included (its
// group commit's goroutine too: AllocsPerRun counts the process's).
func TestSmallToolPutAllocations(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	c := newMemCache(t, vfs.NewStrictMem())
	const runs = 100
	allocs := map[string]float64{}
	for i, proto := range []string{"cas", "nx", "turbo"} {
		reqs := puts(proto, runs+1, 4<<10, byte(10+i)) // AllocsPerRun runs once more, to warm up
		next := 0
		allocs[proto] = testing.AllocsPerRun(runs, func() {
			if code, body := c.serve(reqs[next]); code/100 != 2 {
				t.Fatalf("%s PUT: %d %q", proto, code, body)
			}
			next++
		})
	}
	t.Logf("allocations per 4 KiB PUT, the server's: %v", allocs)
	for _, proto := range []string{"nx", "turbo"} {
		if allocs[proto] > 1.2*allocs["cas"] {
			t.Errorf("a 4 KiB %s PUT made %.0f allocations, more than 1.2 times a /cas/ PUT's %.0f", proto, allocs[proto], allocs["cas"])
		}
	}
}

// Under a --max-blob-size that an entry's content fits and its record
// holding it would not, the entry is still stored (the content as a blob
// of its own) and served.
func TestKeyedContentNearTheSizeLimit(t *testing.T) {
	store, err := disk.OpenStore(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	const limit = 4 << 10
	h, err := httpcache.New(decorator.LimitSize(store, limit), httpcache.Options{MaxBlobSize: limit})
	if err != nil {
		t.Fatal(err)
	}
	c := &memCache{t: t, store: store, h: h}
	data := testblob.Pattern(limit-10, 30)
	for _, path := range []string{"/v1/cache/1", "/v8/artifacts/01?slug=s", "/maven/v1/g/a/1/buildinfo.xml"} {
		if code, body := c.serve(request("PUT", path, data)); code/100 != 2 {
			t.Fatalf("PUT %s of %d bytes under a limit of %d: %d %q", path, len(data), limit, code, body)
		}
		if code, body := c.serve(request("GET", path, nil)); code != 200 || !bytes.Equal(body, data) {
			t.Fatalf("GET %s: %d, %d bytes; want its %d bytes", path, code, len(body), len(data))
		}
	}
}

// Whenever the machine crashes during a run of Nx and Turborepo PUTs,
// small (content in the record) and large (content, then a record naming
// it), what the store holds after is whole: every entry whose PUT was
// answered before the crash is served with its bytes, any other is served
// with its bytes or is a miss, and the store holds a record for no entry
// but those served (a record without its content would be one more). An
// entry lost is written again; one kept is still refused a second write.
func TestKeyedEntriesAfterCrash(t *testing.T) {
	type entry struct {
		path string
		data []byte
	}
	var entries []entry
	for i, size := range []int{4 << 10, 64 << 10, 0, 16 << 10, (16 << 10) + 1, 1 << 20} {
		data := testblob.Pattern(size, byte(20+i))
		entries = append(entries, entry{fmt.Sprintf("/v1/cache/%d", 100+i), data})
		entries = append(entries, entry{fmt.Sprintf("/v8/artifacts/%016x?slug=team", 200+i), data})
	}
	for crashAt := 1; ; crashAt++ {
		fs := vfs.NewStrictMem()
		c := newMemCache(t, fs)
		fs.CrashAtSync(crashAt)
		answered := make([]bool, len(entries)) // before the crash
		for i, e := range entries {
			if code, body := c.serve(request("PUT", e.path, e.data)); code/100 != 2 {
				t.Fatalf("crash at sync %d: PUT %s: %d %q", crashAt, e.path, code, body)
			}
			answered[i] = !fs.Crashed()
		}
		if !fs.Crashed() {
			break // every crash point of the run tried
		}
		c.store.Close()
		fs.ResetToSyncedState()
		c = newMemCache(t, fs)
		served := make([]bool, len(entries))
		for i, e := range entries {
			code, body := c.serve(request("GET", e.path, nil))
			served[i] = code == 200 && bytes.Equal(body, e.data)
			if !served[i] && (code != 404 || answered[i]) {
				t.Errorf("crash at sync %d: GET %s (answered before the crash: %v): %d, %d bytes; want its %d bytes", crashAt, e.path, answered[i], code, len(body), len(e.data))
			}
		}
		if st, n := c.store.Stats(), int64(countTrue(served)); st.ActionResults != n {
			t.Errorf("crash at sync %d: %d entries served, and %d records stored", crashAt, n, st.ActionResults)
		}
		for i, e := range entries {
			want := 409 // kept: written once
			if !served[i] {
				want = 200 // lost: written again (Turborepo answers 202)
			}
			if code, body := c.serve(request("PUT", e.path, e.data)); code/100 != want/100 || code == 409 && want != 409 {
				t.Errorf("crash at sync %d: a second PUT of %s (served after the crash: %v): %d %q", crashAt, e.path, served[i], code, body)
			}
		}
		c.store.Close()
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
