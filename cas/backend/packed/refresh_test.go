package packed

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/cas/tier"
)

// warnings is a slog handler that keeps the warnings' messages and their
// "index" attributes.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	w.mu.Lock()
	w.lines = append(w.lines, line)
	w.mu.Unlock()
	return nil
}

func (w *warnings) naming(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, l := range w.lines {
		if strings.Contains(l, name) {
			n++
		}
	}
	return n
}

// An object under the index prefix whose name is dated far ahead (2096),
// or a node whose clock runs five minutes or an hour ahead, blinds no
// node: the listings go on starting from this node's clock, so another
// node's later packs are seen at its next refresh. A name within
// maxIndexSkew ahead is read at once; the farther ones are not read, and
// each is logged once however many refreshes list it.
func TestIndexNamesAheadOfTheClockBlindNoNode(t *testing.T) {
	m := newMemBucket()
	log := &warnings{}
	writer := newManual(t, m, Config{})
	reader := newManual(t, m, Config{Logger: slog.New(log)})
	far := indexPrefix + "04000000000000000000-0000000000000000"
	m.set(far, bytes.Repeat([]byte{0xee}, 100))
	// Indexes written by nodes whose clocks are five minutes and an hour
	// ahead: real indexes, under names dated then.
	rename := func(data []byte, ahead time.Duration) string {
		before := m.withPrefix(indexPrefix)
		putAll(t, writer, blobUpload(data))
		name := indexName(time.Now().Add(ahead))
		for _, written := range m.withPrefix(indexPrefix) {
			if !slices.Contains(before, written) {
				index := m.get(written)
				m.DeleteObject(context.Background(), written)
				m.set(name, index)
			}
		}
		return name
	}
	ahead, near := testblob.Random(700, 1), testblob.Random(800, 2)
	aheadName := rename(ahead, time.Hour)
	rename(near, 5*time.Minute)
	refresh(t, reader)
	if got := stat(t, reader, tier.BlobKey(cas.DigestOf(near))); got[0] != int64(len(near)) {
		t.Fatalf("an index named 5 minutes ahead: Stat %d; want it read", got[0])
	}
	for i := range 3 {
		data := testblob.Random(1000+i, uint64(10+i))
		putAll(t, writer, blobUpload(data))
		refresh(t, reader)
		if got := stat(t, reader, tier.BlobKey(cas.DigestOf(data))); got[0] != int64(len(data)) {
			t.Fatalf("refresh %d after another node's Put, with an index named in 2096 and one an hour ahead: Stat %d; want %d", i, got[0], len(data))
		}
	}
	for _, name := range []string{far, aheadName} {
		if n := log.naming(name); n != 1 {
			t.Errorf("%s was logged %d times in 4 refreshes; want once", name, n)
		}
		for _, read := range m.readNames() {
			if read == name {
				t.Errorf("%s was read", name)
			}
		}
	}
	if st := reader.Stats(); st.BadIndexes != 0 {
		t.Errorf("%d bad indexes: a name ahead of the clock was read", st.BadIndexes)
	}
	if got := stat(t, reader, tier.BlobKey(cas.DigestOf(ahead))); got[0] != -1 {
		t.Fatalf("the index named an hour ahead was read: Stat %d", got[0])
	}
}

// A name that does not parse as an index's is not read, logged once, and
// does not send the listings back to the prefix's start: after the first,
// every listing starts within ListWindow of the newest name read.
func TestAnUnparsableIndexNameDoesNotListEverything(t *testing.T) {
	m := newMemBucket()
	log := &warnings{}
	writer := newManual(t, m, Config{})
	reader := newManual(t, m, Config{Logger: slog.New(log)})
	bad := indexPrefix + "zz-not-an-index"
	m.set(bad, []byte("garbage"))
	for i := range 3 {
		putAll(t, writer, blobUpload(testblob.Random(500+i, uint64(20+i))))
		refresh(t, reader)
	}
	m.mu.Lock()
	afters := m.afters
	m.mu.Unlock()
	for i, after := range afters[1:] {
		if after == "" {
			t.Errorf("listing %d started at the prefix's start (listings from: %q)", i+2, afters)
		}
	}
	if n := log.naming(bad); n != 1 {
		t.Errorf("the unparsable name was logged %d times in 3 refreshes; want once", n)
	}
	if st := reader.Stats(); st.BadIndexes != 0 {
		t.Errorf("%d bad indexes: the unparsable name was read", st.BadIndexes)
	}
}

// The names read are forgotten once no listing can return them (twice
// ListWindow behind the newest), whatever else is under the prefix.
func TestTheNamesReadArePruned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemBucket()
		writer := newManual(t, m, Config{})
		reader := newManual(t, m, Config{})
		m.set(indexPrefix+"zz-not-an-index", []byte("garbage"))
		m.set(indexPrefix+"04000000000000000000-0000000000000000", []byte("from 2096"))
		putAll(t, writer, blobUpload(testblob.Random(100, 30)))
		refresh(t, reader)
		time.Sleep(3 * reader.cfg.ListWindow)
		putAll(t, writer, blobUpload(testblob.Random(100, 31)))
		refresh(t, reader)
		reader.seenMu.Lock()
		n := len(reader.seen)
		reader.seenMu.Unlock()
		if n != 1 {
			t.Fatalf("after 3 ListWindows, the reader remembers %d names read; want the newest only", n)
		}
	})
}
