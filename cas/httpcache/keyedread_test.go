package httpcache_test

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/httpcache"
	"github.com/membuf/membuf/cas/internal/testblob"
)

// A keyed entry kept in its record, one of whose bytes rots on disk, is
// never served, whether the disk store checks its reads or not (then the
// record's own check finds it), packed or in a file of its own: the GET
// is a 404, and so is every GET after.
func TestRottenInlineEntryIsNeverServed(t *testing.T) {
	for name, opts := range map[string][]disk.StoreOption{
		"checked":         nil,
		"unchecked":       {disk.WithoutReadChecks()},
		"unchecked-files": {disk.WithPacks(0), disk.WithoutReadChecks()},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCache(t, httpcache.Options{}, opts...)
			data := testblob.Random(4<<10, 9)
			for i, key := range []string{"/gradle/rots", "/v1/cache/9"} {
				c.want(200, "PUT", key, data)
				if got := c.want(200, "GET", key, nil); !bytes.Equal(got, data) {
					t.Fatalf("GET %s before the damage: %d bytes, want the %d PUT", key, len(got), len(data))
				}
				flipEveryCopy(t, c.dir, data, int64(1000+i))
				code, body, _, err := c.do("GET", key, nil)
				if code != 404 || bytes.Contains(body, data[:1000]) {
					t.Fatalf("GET %s of a damaged record: %d, %d bytes, %v; want 404 and none of its bytes", key, code, len(body), err)
				}
				c.want(404, "GET", key, nil)
				data = testblob.Random(4<<10, 10) // another, for the next key
			}
		})
	}
}

// flipEveryCopy flips the byte at off into data in every file under dir
// that holds data, and fails unless there is one.
func flipEveryCopy(t *testing.T, dir string, data []byte, off int64) {
	t.Helper()
	found := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for at, base := bytes.Index(b, data), 0; at >= 0; at = bytes.Index(b[base:], data) {
			disktest.FlipByte(t, path, int64(base+at)+off, true)
			found++
			base += at + len(data)
		}
		return nil
	})
	if err != nil || found == 0 {
		t.Fatalf("the content is in no file under %s (%v)", dir, err)
	}
}

// countingPool is a membuf.Pool that counts the buffers taken and given
// back.
type countingPool struct {
	*membuf.Pool
	gets, puts atomic.Int64
}

func (p *countingPool) Get(n int) *[]byte {
	p.gets.Add(1)
	return p.Pool.Get(n)
}

func (p *countingPool) GetUncleared(n int) *[]byte {
	p.gets.Add(1)
	return p.Pool.GetUncleared(n)
}

func (p *countingPool) Put(b *[]byte) {
	p.puts.Add(1)
	p.Pool.Put(b)
}

// A GET of a small keyed entry reads its record into a buffer of the
// handler's pool, which it gives back: as many buffers are given back as
// were taken, and the GET allocates less than the content's size (the
// record is not read into a fresh slice). Through each tool's path.
func TestKeyedGetReadsIntoThePool(t *testing.T) {
	inner, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pool := &countingPool{Pool: inner}
	c := newCache(t, httpcache.Options{Pool: pool})
	data := testblob.Random(4<<10, 11)
	for key, putCode := range map[string]int{"/gradle/pooled": 200, "/v1/cache/11": 200, "/v8/artifacts/0b?slug=s": 202} {
		c.want(putCode, "PUT", key, data)
		req := httptest.NewRequest("GET", key, nil)
		w := &discardWriter{header: http.Header{}}
		get := func() {
			clear(w.header)
			w.code, w.n = 0, 0
			c.h.ServeHTTP(w, req)
			if w.code != 200 || w.n != len(data) {
				t.Fatalf("GET %s: %d, %d bytes", key, w.code, w.n)
			}
		}
		get() // the pool's first buffers, and whatever else is made once
		const n = 200
		getsBefore := pool.gets.Load()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			get()
		}
		runtime.ReadMemStats(&after)
		if gets := pool.gets.Load() - getsBefore; gets < n {
			t.Errorf("GET %s: %d buffers taken from the pool in %d GETs; want the record read into one each", key, gets, n)
		}
		if gets, puts := pool.gets.Load(), pool.puts.Load(); gets != puts {
			t.Errorf("GET %s: %d buffers taken from the pool, %d given back", key, gets, puts)
		}
		if perGet := (after.TotalAlloc - before.TotalAlloc) / n; perGet >= uint64(len(data)) {
			t.Errorf("GET %s allocates %d bytes; want fewer than its content's %d", key, perGet, len(data))
		}
	}
}

// discardWriter is an http.ResponseWriter that keeps the status and
// counts the body.
type discardWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	w.n += len(p)
	return len(p), nil
}
