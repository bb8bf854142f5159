package gocacheprog_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/gocacheprog"
)

// fakeGocached is gocached's protocol over a map, with hooks to make it
// lie, fail or stall.
type fakeGocached struct {
	mu       sync.Mutex
	entries  map[string]fakeEntry // by action ID
	asked    map[string]int       // GETs, by action ID
	requests atomic.Int64         // of any method
	gets     atomic.Int64
	puts     atomic.Int64
	// answer, if set, answers a GET in place of the map.
	answer func(w http.ResponseWriter, r *http.Request) bool
	// putGate, if set, holds each PUT until it is closed or the request
	// ends.
	putGate chan struct{}
}

type fakeEntry struct {
	outputID string
	body     []byte
}

func newFakeGocached(t *testing.T) (*fakeGocached, *httptest.Server) {
	f := &fakeGocached{entries: map[string]fakeEntry{}, asked: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeGocached) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	switch r.Method {
	case http.MethodGet:
		f.gets.Add(1)
		if f.answer != nil && f.answer(w, r) {
			return
		}
		aid, ok := strings.CutPrefix(r.URL.Path, "/action/")
		if !ok || r.Header.Get("Want-Object") != "1" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		e, ok := f.entries[aid]
		f.asked[aid]++
		f.mu.Unlock()
		if !ok {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Go-Output-Id", e.outputID)
		w.Header().Set("Content-Length", fmt.Sprint(len(e.body)))
		w.Write(e.body)
	case http.MethodPut:
		f.puts.Add(1)
		body, err := io.ReadAll(r.Body)
		if f.putGate != nil {
			// After the body: the server notices a client that leaves
			// only once it has read the request.
			select {
			case <-f.putGate:
			case <-r.Context().Done():
				return
			}
		}
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if len(parts) != 2 || err != nil || int64(len(body)) != r.ContentLength {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.entries[parts[0]] = fakeEntry{parts[1], body}
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

// askedFor is how many GETs asked for action.
func (f *fakeGocached) askedFor(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[hex.EncodeToString(actionID(action))]
}

func (f *fakeGocached) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.entries)
}

func id(b []byte) gocacheprog.ID { return gocacheprog.ID(b) }

func openCache(t testing.TB, opts gocacheprog.Options) *gocacheprog.Cache {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := gocacheprog.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func httpRemote(t *testing.T, url string) gocacheprog.Remote {
	t.Helper()
	r, err := gocacheprog.OpenRemote(url, gocacheprog.RemoteConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func putBytes(t *testing.T, c *gocacheprog.Cache, action string, body []byte) gocacheprog.Entry {
	t.Helper()
	e, err := c.Put(id(actionID(action)), id(outputID(body)), int64(len(body)), func(w io.Writer) (int64, error) {
		n, err := w.Write(body)
		return int64(n), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func readDiskPath(t *testing.T, e gocacheprog.Entry) []byte {
	t.Helper()
	if !filepath.IsAbs(e.DiskPath) {
		t.Fatalf("DiskPath %q is not absolute", e.DiskPath)
	}
	b, err := os.ReadFile(e.DiskPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A machine puts, another (an empty directory) gets it from the remote.
func TestRemoteSharesOutputs(t *testing.T) {
	fake, srv := newFakeGocached(t)
	a := openCache(t, gocacheprog.Options{Remote: httpRemote(t, srv.URL)})
	body := []byte("package main's object file")
	putBytes(t, a, "compile main", body)
	putBytes(t, a, "empty output", nil)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if fake.len() != 2 {
		t.Fatalf("the remote holds %d entries after close, want 2 (close waits for the uploads)", fake.len())
	}
	b := openCache(t, gocacheprog.Options{Remote: httpRemote(t, srv.URL)})
	defer b.Close()
	e, ok := b.Get(context.Background(), id(actionID("compile main")))
	if !ok || e.OutputID != id(outputID(body)) || e.Size != int64(len(body)) {
		t.Fatalf("get on machine B: %+v, %v", e, ok)
	}
	if got := readDiskPath(t, e); !bytes.Equal(got, body) {
		t.Fatalf("DiskPath holds %q, want %q", got, body)
	}
	if e, ok := b.Get(context.Background(), id(actionID("empty output"))); !ok || e.Size != 0 || len(readDiskPath(t, e)) != 0 {
		t.Fatalf("the empty output: %+v, %v", e, ok)
	}
	if _, ok := b.Get(context.Background(), id(actionID("compile main"))); !ok {
		t.Fatal("a second get missed")
	}
	if _, ok := b.Get(context.Background(), id(actionID("never built"))); ok {
		t.Fatal("a hit for an action nobody put")
	}
	// gocached's protocol answers a get with the output: one request
	// each, the two hits and the miss; the second get of an output is
	// answered by the directory.
	for action, want := range map[string]int{"compile main": 1, "empty output": 1, "never built": 1} {
		if n := fake.askedFor(action); n != want {
			t.Errorf("machine B's gets of %q made %d requests, want %d", action, n, want)
		}
	}
}

// A remote whose bytes do not match the output ID they come under is
// never believed: go gets a miss, the directory keeps nothing of it, and
// the remote is asked nothing more.
func TestLyingRemoteIsNeverBelieved(t *testing.T) {
	body := []byte("the real output")
	for name, lie := range map[string]func(w http.ResponseWriter){
		"other bytes": func(w http.ResponseWriter) {
			w.Header().Set("Go-Output-Id", hex.EncodeToString(outputID(body)))
			w.Header().Set("Content-Length", "15")
			w.Write([]byte("the fake output"))
		},
		"longer": func(w http.ResponseWriter) {
			w.Header().Set("Go-Output-Id", hex.EncodeToString(outputID(body)))
			w.Header().Set("Content-Length", fmt.Sprint(len(body)+1))
			w.Write(append(body[:len(body):len(body)], '!'))
		},
		"shorter": func(w http.ResponseWriter) {
			w.Header().Set("Go-Output-Id", hex.EncodeToString(outputID(body)))
			w.Header().Set("Content-Length", fmt.Sprint(len(body)-1))
			w.Write(body[:len(body)-1])
		},
		"cut short": func(w http.ResponseWriter) {
			w.Header().Set("Go-Output-Id", hex.EncodeToString(outputID(body)))
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.Write(body[:4])
			panic(http.ErrAbortHandler)
		},
		"bad output ID": func(w http.ResponseWriter) {
			w.Header().Set("Go-Output-Id", "zz")
			w.Write(body)
		},
		"server error": func(w http.ResponseWriter) { http.Error(w, "boom", http.StatusInternalServerError) },
	} {
		t.Run(name, func(t *testing.T) {
			fake, srv := newFakeGocached(t)
			fake.answer = func(w http.ResponseWriter, r *http.Request) bool { lie(w); return true }
			dir := t.TempDir()
			c := openCache(t, gocacheprog.Options{Dir: dir, Remote: httpRemote(t, srv.URL)})
			defer c.Close()
			if e, ok := c.Get(context.Background(), id(actionID("x"))); ok {
				t.Fatalf("a hit from a lying remote: %+v", e)
			}
			if _, err := os.Stat(filepath.Join(dir, "o", hex.EncodeToString(outputID(body))[:2], hex.EncodeToString(outputID(body)))); !os.IsNotExist(err) {
				t.Fatalf("the directory kept the lie's output: %v", err)
			}
			if _, ok := c.Get(context.Background(), id(actionID("y"))); ok || fake.gets.Load() != 1 {
				t.Fatalf("after the lie: %d gets reached the remote, want 1", fake.gets.Load())
			}
			if c.Stats().RemoteErrors.Load() == 0 {
				t.Error("the lie was not counted as a remote error")
			}
		})
	}
}

// A remote that is down or stalls costs one wait, then is left alone; puts
// are kept locally and Close does not hang.
func TestRemoteDownOrSlow(t *testing.T) {
	t.Run("down", func(t *testing.T) {
		_, srv := newFakeGocached(t)
		url := srv.URL
		srv.Close()
		c := openCache(t, gocacheprog.Options{Remote: httpRemote(t, url)})
		for i := range 3 {
			if _, ok := c.Get(context.Background(), id(actionID(fmt.Sprint(i)))); ok {
				t.Fatal("a hit from a remote that is down")
			}
		}
		e := putBytes(t, c, "a", []byte("kept locally"))
		if string(readDiskPath(t, e)) != "kept locally" {
			t.Fatal("the put was not kept locally")
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if n := c.Stats().RemoteErrors.Load(); n != 1 {
			t.Errorf("%d remote errors, want 1: the remote is left alone after the first", n)
		}
	})
	t.Run("slow", func(t *testing.T) {
		fake, srv := newFakeGocached(t)
		release := make(chan struct{})
		defer close(release) // before srv.Close, which waits for the handlers
		fake.answer = func(w http.ResponseWriter, r *http.Request) bool {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return true
		}
		const timeout = 100 * time.Millisecond
		c := openCache(t, gocacheprog.Options{Remote: httpRemote(t, srv.URL), GetTimeout: timeout})
		defer c.Close()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if _, ok := c.Get(context.Background(), id(actionID(fmt.Sprint(i)))); ok {
					t.Error("a hit from a remote that never answers")
				}
			})
		}
		wg.Wait()
		for i := range 100 {
			c.Get(context.Background(), id(actionID(fmt.Sprint("later", i))))
		}
		if n := fake.gets.Load(); n > 8 {
			t.Errorf("%d gets reached the stalled remote; after the first timeout none should", n)
		}
		// Each of the first gets waits out its timeout; none waits for the
		// remote. The bound is loose: a loaded machine is slow, not 50x.
		if d := time.Since(start); d > 50*timeout {
			t.Errorf("108 gets against a stalled remote took %v", d)
		}
	})
}

// In read-only mode, nothing reaches the remote but gets.
func TestReadOnly(t *testing.T) {
	fake, srv := newFakeGocached(t)
	body := []byte("shared")
	fake.entries[hex.EncodeToString(actionID("shared"))] = fakeEntry{hex.EncodeToString(outputID(body)), body}
	c := openCache(t, gocacheprog.Options{Remote: httpRemote(t, srv.URL), ReadOnly: true})
	putBytes(t, c, "untrusted", []byte("from a pull request"))
	e, ok := c.Get(context.Background(), id(actionID("shared")))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !ok || !bytes.Equal(readDiskPath(t, e), body) {
		t.Fatalf("a read-only get: %+v, %v", e, ok)
	}
	if n := fake.puts.Load(); n != 0 {
		t.Fatalf("a read-only cache sent %d PUTs", n)
	}
}

// The upload queue is bounded, and Close waits for it at most UploadWait.
func TestUploadQueueBoundedAndCloseBounded(t *testing.T) {
	fake, srv := newFakeGocached(t)
	fake.putGate = make(chan struct{}) // never opened: each PUT waits until its request ends
	const wait = 200 * time.Millisecond
	c := openCache(t, gocacheprog.Options{Remote: httpRemote(t, srv.URL), UploadQueue: 2, Uploaders: 1, UploadWait: wait})
	for i := range 10 {
		putBytes(t, c, fmt.Sprint(i), []byte(fmt.Sprint("output ", i)))
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < wait || d > wait+10*time.Second {
		t.Errorf("Close took %v with uploads stuck; want UploadWait (%v), not forever", d, wait)
	}
	st := c.Stats()
	// One upload in flight and two queued at most: at least 7 dropped at
	// once, the rest at Close.
	if n := st.UploadsDropped.Load() + st.UploadFails.Load(); n != 10 || st.Uploaded.Load() != 0 {
		t.Errorf("%d of 10 uploads dropped or failed, %d uploaded; want all 10 not uploaded", n, st.Uploaded.Load())
	}
	if st.RemoteErrors.Load() != 0 {
		t.Errorf("uploads cut by Close counted as %d remote errors", st.RemoteErrors.Load())
	}
	if p := fake.puts.Load(); p > 3 {
		t.Errorf("%d PUTs reached the remote; the queue holds 2 and one uploader runs", p)
	}
}

// A put whose bytes do not hash to the output ID go gave is refused: the
// directory never holds a file under a name its bytes do not have.
func TestPutChecksOutputID(t *testing.T) {
	c := openCache(t, gocacheprog.Options{})
	defer c.Close()
	body := []byte("abc")
	_, err := c.Put(id(actionID("a")), id(outputID([]byte("abd"))), 3, func(w io.Writer) (int64, error) {
		n, err := w.Write(body)
		return int64(n), err
	})
	if err == nil {
		t.Fatal("a put whose bytes do not match its output ID was kept")
	}
	if _, ok := c.Get(context.Background(), id(actionID("a"))); ok {
		t.Fatal("a get found the refused put")
	}
}

// A local directory that fails is a miss that does not blame the remote:
// once the directory works again, the remote is asked.
func TestLocalFailureKeepsTheRemote(t *testing.T) {
	fake, srv := newFakeGocached(t)
	body := []byte("shared")
	fake.entries[hex.EncodeToString(actionID("shared"))] = fakeEntry{hex.EncodeToString(outputID(body)), body}
	dir := t.TempDir()
	c := openCache(t, gocacheprog.Options{Dir: dir, Remote: httpRemote(t, srv.URL)})
	defer c.Close()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o644); err != nil { // no directory to write into
		t.Fatal(err)
	}
	if _, ok := c.Get(context.Background(), id(actionID("shared"))); ok {
		t.Fatal("a hit with no directory to keep it in")
	}
	os.Remove(tmp)
	os.Mkdir(tmp, 0o755)
	if e, ok := c.Get(context.Background(), id(actionID("shared"))); !ok || !bytes.Equal(readDiskPath(t, e), body) {
		t.Fatalf("after the directory's failure the remote was left alone: %+v, %v", e, ok)
	}
	if n := c.Stats().RemoteErrors.Load(); n != 0 {
		t.Errorf("the directory's failure counted as %d remote errors", n)
	}
}
