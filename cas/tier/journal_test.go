package tier

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
)

func TestJournalReplaysPendingAndSkipsTornLines(t *testing.T) {
	dir := t.TempDir()
	a := BlobKey(cas.DigestOf([]byte("a")))
	b := BlobKey(cas.DigestOf([]byte("b")))
	c := ActionKey(cas.DigestOf([]byte("c")))
	var lines []byte
	lines = appendJournalLine(lines, true, a)
	lines = appendJournalLine(lines, true, b)
	lines = appendJournalLine(lines, true, c)
	lines = appendJournalLine(lines, false, a)
	lines = append(lines, "garbage line\n"...)
	lines = append(lines, appendJournalLine(nil, false, b)[:20]...) // torn by a crash
	if err := os.WriteFile(filepath.Join(dir, "s3"+JournalSuffix), lines, 0o644); err != nil {
		t.Fatal(err)
	}
	j, pending, skipped, err := openJournal(filepath.Join(dir, "s3"+JournalSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 || pending[0] != b || pending[1] != c || skipped != 2 {
		t.Fatalf("pending %v, skipped %d; want b and c pending, 2 lines skipped", pending, skipped)
	}
	// Reopening the rewritten journal finds the same, and nothing skipped.
	j.done(b)
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	j, pending, skipped, err = openJournal(filepath.Join(dir, "s3"+JournalSuffix))
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if len(pending) != 1 || pending[0] != c || skipped != 0 {
		t.Fatalf("after a done and a rewrite: pending %v, skipped %d", pending, skipped)
	}
}

func TestJournalConcurrentAddsAreAllDurable(t *testing.T) {
	dir := t.TempDir()
	j, _, _, err := openJournal(filepath.Join(dir, "s3"+JournalSuffix))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	keys := make([]Key, n)
	for i := range n {
		keys[i] = BlobKey(cas.DigestOf([]byte{byte(i), byte(i >> 8)}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := j.add(keys[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Read the file as a crash would leave it: what add returned for is there.
	data, err := os.ReadFile(filepath.Join(dir, "s3"+JournalSuffix))
	if err != nil {
		t.Fatal(err)
	}
	found := map[Key]bool{}
	replayJournal(data, func(add bool, k Key) { found[k] = add })
	for _, k := range keys {
		if !found[k] {
			t.Fatalf("add of %s returned but the file lacks it", k)
		}
	}
	j.close()
}

func TestParseJournalLine(t *testing.T) {
	h := cas.DigestOf([]byte("x")).Hash
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"+ cas " + h + " 1", true},
		{"- cas " + h + " 1", true},
		{"+ ac " + h + " 0", true},
		{"+ ac " + h + " 142", true},  // the action's size (0 in an older journal)
		{"+ cas " + h + " 01", false}, // not the canonical number
		{"+ cas " + h + " -1", false},
		{"* cas " + h + " 1", false},
		{"+ blob " + h + " 1", false},
		{"+ cas " + strings.ToUpper(h) + " 1", false},
		{"+ cas " + h + " 1 extra", false},
		{"+ cas " + h, false},
		{"", false},
	} {
		if _, _, ok := parseJournalLine([]byte(c.line)); ok != c.ok {
			t.Errorf("parseJournalLine(%q) ok = %v, want %v", c.line, ok, c.ok)
		}
	}
}

// FuzzJournal: replaying any bytes never panics, and every line it accepts
// formats back to itself.
func FuzzJournal(f *testing.F) {
	h := cas.DigestOf([]byte("x")).Hash
	f.Add([]byte("+ cas " + h + " 1\n- cas " + h + " 1\n"))
	f.Add([]byte("+ ac " + h + " 0\n+ cas " + h + " 9\ntorn"))
	f.Add([]byte("\n\n+ cas  1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		replayJournal(data, func(add bool, k Key) {
			line := appendJournalLine(nil, add, k)
			add2, k2, ok := parseJournalLine(line[:len(line)-1])
			if !ok || add2 != add || k2 != k {
				t.Fatalf("%q does not parse back to what made it", line)
			}
		})
	})
}

// TestJournalOfEveryFunction: a journal written before digest functions
// were named (its lines as they were, typed out here) is read as SHA-256
// entries, and entries of other functions, one BLAKE3 of the same hash
// among them, come back with their functions.
func TestJournalOfEveryFunction(t *testing.T) {
	sha := cas.DigestOf([]byte("a"))
	old := "+ cas " + sha.Hash + " 1\n+ ac " + sha.Hash + " 0\n"
	var keys []Key
	for _, f := range cas.Functions {
		keys = append(keys, BlobKey(f.Digest([]byte("a"))), ActionKey(f.Digest([]byte("action"))))
	}
	b3 := BlobKey(cas.Digest{Hash: sha.Hash, Size: 1, Function: cas.BLAKE3})
	keys = append(keys, b3)
	lines := []byte(old)
	for _, k := range keys[2:] { // SHA-256's two are the old lines
		lines = appendJournalLine(lines, true, k)
	}
	lines = append(lines, "+ cas/sha256 "+sha.Hash+" 1\n+ cas/md5 "+sha.Hash[:32]+" 1\n+ cas/blake3 "+sha.Hash[:40]+" 1\n"...)
	path := filepath.Join(t.TempDir(), "s3"+JournalSuffix)
	if err := os.WriteFile(path, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	j, pending, skipped, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	if len(pending) != len(keys) || skipped != 3 {
		t.Fatalf("%d pending, %d skipped; want %d pending and the 3 lines naming SHA-256, MD5 and a short BLAKE3 skipped", len(pending), skipped, len(keys))
	}
	want := map[Key]bool{ActionKey(cas.Digest{Hash: sha.Hash}): true}
	for _, k := range keys {
		want[k] = true
	}
	for _, k := range pending {
		if !want[k] {
			t.Errorf("replayed %+v, which was not journaled", k)
		}
	}
	if pending[0] != BlobKey(sha) || pending[len(pending)-1] != b3 {
		t.Fatalf("replayed %+v first and %+v last; want the old SHA-256 line's key and the BLAKE3 one", pending[0], pending[len(pending)-1])
	}
}
