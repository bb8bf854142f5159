package tier

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
)

// JournalSuffix ends the upload journal's file name, in Config.Dir:
// {Config.Name}-uploads.journal (s3-uploads.journal for an S3 tier, the
// name it has always had).
const JournalSuffix = "-uploads.journal"

// journal makes the upload queue durable: before an entry is committed to
// disk, a line "+ cas {hash} {size}" (or "+ ac {hash} {size}", the action's) is appended and
// fsynced; after the backend has it, "- cas {hash} {size}" is appended
// (not fsynced: losing it costs one repeated, idempotent upload). At start
// the entries added and not removed are the uploads a previous run left
// unfinished. Concurrent adds share one fsync (group commit): whoever finds
// no flush running writes everything buffered so far, syncs it, and wakes
// the others whose lines it covered.
type journal struct {
	path string

	mu       sync.Mutex
	cond     sync.Cond
	f        *os.File
	buf      []byte // lines not yet written
	epoch    uint64 // the flush that will write buf
	durable  uint64 // the last flush that completed
	flushing bool
	err      error // a failed write or sync: the journal is no longer durable
	size     int64 // bytes in the file
	pending  map[Key]struct{}
}

// compactBytes is the file size past which a flush rewrites the journal
// with only its pending entries.
const compactBytes = 16 << 20

// openJournal reads the journal at path (missing means empty), rewrites it
// with only its pending entries, and returns it with those entries, oldest
// first. Lines it cannot parse (a line torn by a crash) are skipped and
// counted in skipped.
func openJournal(path string) (j *journal, pending []Key, skipped int, err error) {
	j = &journal{path: path, pending: make(map[Key]struct{})}
	j.cond.L = &j.mu
	data, err := os.ReadFile(j.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, 0, fmt.Errorf("tier: reading the upload journal: %w", err)
	}
	var order []Key
	skipped = replayJournal(data, func(add bool, k Key) {
		if add {
			if _, ok := j.pending[k]; !ok {
				order = append(order, k)
			}
			j.pending[k] = struct{}{}
		} else {
			delete(j.pending, k)
		}
	})
	for _, k := range order {
		if _, ok := j.pending[k]; ok {
			pending = append(pending, k)
			delete(j.pending, k) // so a key added twice is listed once
		}
	}
	for _, k := range pending {
		j.pending[k] = struct{}{}
	}
	if err := j.rewriteLocked(); err != nil {
		return nil, nil, 0, err
	}
	return j, pending, skipped, nil
}

// replayJournal calls fn with each well-formed line of data in order and
// returns how many lines were not.
func replayJournal(data []byte, fn func(add bool, k Key)) (skipped int) {
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !found {
			skipped++ // torn: the crash came before its newline
			break
		}
		add, k, ok := parseJournalLine(line)
		if !ok {
			skipped++
			continue
		}
		fn(add, k)
	}
	return skipped
}

// parseJournalLine parses "+ cas {hash} {size}", "- ac {hash} {size}" and so on (a journal of an
// older version has 0 for an action result's size).
func parseJournalLine(line []byte) (add bool, k Key, ok bool) {
	f := bytes.Split(line, []byte{' '})
	if len(f) != 4 {
		return false, k, false
	}
	switch string(f[0]) {
	case "+":
		add = true
	case "-":
	default:
		return false, k, false
	}
	// The kind, "cas" or "ac", with the digest function after a slash
	// unless it is SHA-256 (a journal written before functions were
	// named has none).
	kind, function, named := bytes.Cut(f[1], []byte{'/'})
	switch string(kind) {
	case "cas":
	case "ac":
		k.AC = true
	default:
		return false, k, false
	}
	if named {
		fn, ok := cas.FunctionNamed(string(function))
		if !ok || fn == cas.SHA256 {
			return false, k, false
		}
		k.Function = fn
	}
	size, err := strconv.ParseInt(string(f[3]), 10, 64)
	if err != nil || size < 0 || string(f[3]) != strconv.FormatInt(size, 10) {
		return false, k, false
	}
	d, err := cas.ParseDigestFor(k.Function, &repb.Digest{Hash: string(f[2]), SizeBytes: size})
	if err != nil {
		return false, k, false
	}
	k.Hash, k.Size = d.Hash, d.Size
	return add, k, true
}

// appendJournalLine appends k's line to b.
func appendJournalLine(b []byte, add bool, k Key) []byte {
	if add {
		b = append(b, "+ "...)
	} else {
		b = append(b, "- "...)
	}
	if k.AC {
		b = append(b, "ac"...)
	} else {
		b = append(b, "cas"...)
	}
	if k.Function != cas.SHA256 {
		b = append(append(b, '/'), k.Function.String()...)
	}
	b = append(b, ' ')
	b = append(b, k.Hash...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, k.Size, 10)
	return append(b, '\n')
}

// add records keys as pending and returns once that is durable: one
// flush for them all (a batch's blobs), shared with any other adds that
// join it.
func (j *journal) add(keys ...Key) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("tier: the upload journal is closed")
	}
	for _, k := range keys {
		j.pending[k] = struct{}{}
		j.buf = appendJournalLine(j.buf, true, k)
	}
	mine := j.epoch
	for j.durable < mine+1 && j.err == nil {
		if j.flushing {
			j.cond.Wait()
			continue
		}
		j.flushLocked()
	}
	if j.err != nil {
		return j.err
	}
	return nil
}

// done records that the backend has k. It is written with the next flush
// and not waited for.
func (j *journal) done(k Key) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.pending[k]; !ok || j.f == nil {
		return
	}
	delete(j.pending, k)
	j.buf = appendJournalLine(j.buf, false, k)
}

// flushLocked writes and syncs what is buffered, unlocking j.mu meanwhile
// so that more lines can join the next flush. The caller holds j.mu and no
// flush is running.
func (j *journal) flushLocked() {
	j.flushing = true
	buf, f := j.buf, j.f
	j.buf = nil
	j.epoch++
	epoch := j.epoch
	j.mu.Unlock()
	_, err := f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	j.mu.Lock()
	j.flushing = false
	j.durable = epoch
	j.size += int64(len(buf))
	if j.buf == nil {
		j.buf = buf[:0] // reuse the buffer
	}
	if err != nil {
		j.err = fmt.Errorf("tier: writing the upload journal: %w", err)
	} else if j.size > compactBytes {
		if err := j.rewriteLocked(); err != nil {
			j.err = err
		}
	}
	j.cond.Broadcast()
}

// rewriteLocked replaces the file with one listing only the pending
// entries (and whatever is buffered), atomically: a new file, fsynced,
// renamed over the old, and the directory fsynced.
func (j *journal) rewriteLocked() error {
	var b []byte
	for k := range j.pending {
		b = appendJournalLine(b, true, k)
	}
	tmp := j.path + ".tmp"
	nf, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err == nil {
		w := bufio.NewWriter(nf)
		w.Write(b)
		if err = w.Flush(); err == nil {
			err = nf.Sync()
		}
		if cerr := nf.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(j.path))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("tier: rewriting the upload journal: %w", err)
	}
	f, err := os.OpenFile(j.path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("tier: opening the upload journal: %w", err)
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size = f, int64(len(b))
	j.buf = j.buf[:0] // the pending set covers the buffered adds; removals are applied
	return nil
}

// close writes what is buffered and closes the file.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.flushing {
		j.cond.Wait()
	}
	if j.f == nil {
		return nil
	}
	if len(j.buf) > 0 && j.err == nil {
		j.flushLocked()
	}
	err := j.f.Close()
	j.f = nil
	if j.err != nil {
		return j.err
	}
	return err
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
