package httpupstream_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/httpupstream"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

func backendWith(t *testing.T, addr string, timeout time.Duration, concurrency int) *httpupstream.Backend {
	t.Helper()
	loc, err := httpupstream.ParseURL("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := httpupstream.New(t.Context(), httpupstream.Config{Location: loc, RequestTimeout: timeout, Concurrency: concurrency})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestStall: an upstream that stops sending a body halfway, never reads
// an upload, or never answers, frees the request after RequestTimeout
// with cas.ErrUnavailable, and the log value says why.
func TestStall(t *testing.T) {
	data := pattern(10_000, 4)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Length", "10000")
			w.Write(data[:5000])
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done() // then nothing more, until the client gives up
	}))
	b := backendWith(t, addr, 300*time.Millisecond, 0)
	k := tier.BlobKey(digestOf(data))
	obj, err := b.Get(t.Context(), k, 0)
	if err != nil {
		t.Fatalf("Get: %v (the answer's header came)", err)
	}
	buf := make([]byte, len(data))
	n := 0
	for err == nil {
		var m int
		m, err = obj.Body.Read(buf[n:])
		n += m
	}
	obj.Body.Close()
	upstreamtest.CheckStalled(t, "reading a body that stops halfway", err)
	if n != 5000 {
		t.Errorf("read %d bytes before the stall, want the 5000 sent", n)
	}
	upstreamtest.CheckStalled(t, "Put to an upstream that never reads it", b.Put(t.Context(), []tier.Upload{upload(tier.BlobKey(digestOf(pattern(4<<20, 5))), pattern(4<<20, 5))})[0])
	sizes := []int64{0}
	upstreamtest.CheckStalled(t, "Stat of an upstream that never answers", b.Stat(t.Context(), []tier.Key{k}, sizes))
	if sizes[0] != -1 {
		t.Errorf("Stat that failed: size %d, want -1", sizes[0])
	}
}

// TestConcurrency: Stat of 40 keys with Concurrency 4 keeps 4 HEADs in
// flight, never more: the server holds each request until 4 are there
// (fewer at once would never be released) and notes any fifth.
func TestConcurrency(t *testing.T) {
	const limit = 4
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	inFlight, released, most := 0, 0, 0
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request whose client gave up wakes the waiters, so that a
		// failing test ends.
		defer context.AfterFunc(r.Context(), func() {
			mu.Lock()
			cond.Broadcast()
			mu.Unlock()
		})()
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		round := released
		if inFlight == limit {
			released++
			inFlight = 0
			cond.Broadcast()
		}
		for released == round && r.Context().Err() == nil {
			cond.Wait()
		}
		mu.Unlock()
		http.NotFound(w, r)
	}))
	b := backendWith(t, addr, 30*time.Second, limit)
	ks := make([]tier.Key, 40)
	for i := range ks {
		ks[i] = tier.BlobKey(digestOf(pattern(100+i, 6)))
	}
	sizes := make([]int64, len(ks))
	if err := b.Stat(t.Context(), ks, sizes); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most != limit || released != len(ks)/limit {
		t.Fatalf("Stat of %d keys with Concurrency %d: at most %d HEADs in flight, %d rounds; want %d and %d", len(ks), limit, most, released, limit, len(ks)/limit)
	}
}

// TestHugeActionResultsAreMissesWithinTheBudget: an upstream answering
// /ac/ with a 60 MiB body, or an endless chunked one. 32 concurrent
// GetActionResult misses through a tier are misses (NOT_FOUND), each read
// stops at the tier's cap (4 MiB) or before it starts (a Content-Length
// over the cap), so the upstream gets to send each at most the cap and
// what the sockets buffer, and the bytes the reads hold together stay
// within the tier's ActionResultBytes.
func TestHugeActionResultsAreMissesWithinTheBudget(t *testing.T) {
	const readers, budget = 32, 16 << 20
	for _, endless := range []bool{false, true} {
		var sent atomic.Int64
		addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method != http.MethodGet:
				return // the probe's HEADs and PUT: 200
			case !strings.Contains(r.URL.Path, "/ac/"):
				http.NotFound(w, r)
				return
			}
			if !endless {
				w.Header().Set("Content-Length", strconv.Itoa(60<<20))
			}
			chunk := make([]byte, 64<<10)
			for i := 0; endless || i < 60<<20/len(chunk); i++ {
				n, err := w.Write(chunk)
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		}))
		s := backendtest.OpenTier(t, tier.Config{Backend: backendWith(t, addr, 10*time.Second, 0), ActionResultBytes: budget})
		var wg sync.WaitGroup
		errs := make([]error, readers)
		for i := range readers {
			wg.Go(func() {
				_, errs[i] = s.GetActionResult(t.Context(), digestOf(fmt.Appendf(nil, "action %d", i)), cas.ClientLookup)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, cas.ErrNotFound) {
				t.Fatalf("endless %v: GetActionResult %d of a 60 MiB or endless answer: %v; want cas.ErrNotFound", endless, i, err)
			}
		}
		// Each read (two, for an endless answer) may leave the sockets'
		// buffers full behind it: a few MiB on loopback, far from the 60
		// MiB a whole read takes.
		if got, most := sent.Load(), int64(readers*32<<20); got > most {
			t.Errorf("endless %v: the upstream sent %d MiB to %d readers, over %d MiB: reads went past the cap", endless, got>>20, readers, most>>20)
		}
		st := s.TierStats()
		if st.ActionResultBytesPeak > budget || st.ActionResultBytesPeak <= 0 || st.ActionResultBytes != 0 {
			t.Errorf("endless %v: action result reads held %d bytes at most (budget %d), %d at the end; want within the budget, and none left", endless, st.ActionResultBytesPeak, budget, st.ActionResultBytes)
		}
	}
}
