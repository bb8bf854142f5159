package gocacheprog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dir is the local directory that holds the files go is handed: an output
// under o/{xx}/{outputID}, the entry naming it under a/{xx}/{actionID}.
// Every file is written under tmp/ and renamed into place, so a reader
// sees a whole file or none, and several programs (several go commands at
// once) may share one Dir: equal names hold equal bytes.
//
// Each open Dir holds a shared lock on the directory's lock file until
// Close; trimming (Trim) removes any entry only under the exclusive lock,
// so never a file a running go command was handed. Without it, a Trim
// removes only what has not been used for UnusedFor.
type Dir struct {
	root string
	lock *os.File
	// touched: a use marks a file used (its mtime, the recency trimming
	// goes by) only if its mark is older than this, as go's own cache
	// does, so that a hit costs no write.
	touchAfter time.Duration

	// emptyEntry is a file under tmp/ holding an entry of the empty
	// output (every compiled package's compiler output, mostly), made at
	// the first such entry and removed by Close: each later one is a hard
	// link to it, which makes no inode, the dearest part of writing a
	// file (on ext4 without a journal, after many files were deleted, a
	// search through the inodes deleted lately).
	emptyMu    sync.Mutex
	emptyEntry string
}

// entryMagic starts an entry file's format.
const entryMagic = "gocacheprog 1 "

// UnusedFor is how long a file must have gone unused before a Trim that
// could not take the directory's exclusive lock removes it: longer than a
// go command keeps the files it was handed.
const UnusedFor = 6 * time.Hour

// OpenDir opens (making it if need be) the directory at root.
func OpenDir(root string) (*Dir, error) {
	if !filepath.IsAbs(root) {
		abs, err := filepath.Abs(root)
		if err != nil {
			return nil, err
		}
		root = abs // go needs absolute DiskPaths
	}
	for _, sub := range []string{"a", "o", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, sub), 0o755); err != nil {
			return nil, err
		}
	}
	lock, err := os.OpenFile(filepath.Join(root, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockShared(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("gocacheprog: locking %s: %w", lock.Name(), err)
	}
	return &Dir{root: root, lock: lock, touchAfter: time.Minute}, nil
}

// Close releases the directory's lock.
func (d *Dir) Close() error {
	d.emptyMu.Lock()
	if d.emptyEntry != "" {
		os.Remove(d.emptyEntry) // its links are entries
		d.emptyEntry = ""
	}
	d.emptyMu.Unlock()
	return d.lock.Close()
}

func (d *Dir) path(kind string, id ID) string {
	h := id.String()
	return filepath.Join(d.root, kind, h[:2], h)
}

// Entry is what the cache holds for an action: its output's ID and size,
// the output's file, and when it was put.
type Entry struct {
	OutputID ID
	Size     int64
	Time     time.Time
	DiskPath string
}

// Get returns the entry for actionID, or false if there is none whole (an
// entry whose output file is gone, or of another size, is none).
func (d *Dir) Get(actionID ID) (Entry, bool) {
	ep := d.path("a", actionID)
	data, err := os.ReadFile(ep)
	if err != nil || len(data) > 256 {
		return Entry{}, false
	}
	e, ok := parseEntry(data)
	if !ok {
		return Entry{}, false
	}
	e.DiskPath = d.path("o", e.OutputID)
	fi, err := os.Stat(e.DiskPath)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
		return Entry{}, false
	}
	d.touch(ep)
	d.touch(e.DiskPath)
	return e, true
}

// touch marks a file used now, if its mark is older than touchAfter.
func (d *Dir) touch(p string) {
	now := time.Now()
	if fi, err := os.Stat(p); err == nil && now.Sub(fi.ModTime()) > d.touchAfter {
		os.Chtimes(p, now, now)
	}
}

// entry file: "gocacheprog 1 {outputID} {size} {unix nanoseconds}\n".
func (e Entry) marshal() []byte {
	return fmt.Appendf(nil, "%s%x %d %d\n", entryMagic, e.OutputID[:], e.Size, e.Time.UnixNano())
}

func parseEntry(b []byte) (Entry, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(entryMagic))
	rest, ok2 := bytes.CutSuffix(rest, []byte("\n"))
	f := strings.Fields(string(rest))
	if !ok || !ok2 || len(f) != 3 {
		return Entry{}, false
	}
	var e Entry
	out, err := hex.DecodeString(f[0])
	size, err1 := strconv.ParseInt(f[1], 10, 64)
	nanos, err2 := strconv.ParseInt(f[2], 10, 64)
	if err != nil || err1 != nil || err2 != nil || len(out) != idLen || size < 0 {
		return Entry{}, false
	}
	copy(e.OutputID[:], out)
	e.Size, e.Time = size, time.Unix(0, nanos)
	return e, true
}

// ErrMismatch is an output whose bytes do not hash to its output ID, or
// whose size is not the one announced.
var ErrMismatch = errors.New("gocacheprog: the output's bytes do not match its output ID")

// Put copies size bytes from body, the output outputID of actionID, into
// the directory: it is kept only if its bytes hash to outputID. write
// reads body into w; it is how the caller's body is read (go's base64
// string, a remote's stream).
func (d *Dir) Put(actionID, outputID ID, size int64, write func(w io.Writer) (int64, error)) (Entry, error) {
	e, err := d.putOutput(outputID, size, write)
	if err != nil {
		return Entry{}, err
	}
	return e, d.putEntry(actionID, e)
}

// putOutput is Put's first half: the output's file, all go needs to be
// handed the entry it returns. Until putEntry, nothing names it.
func (d *Dir) putOutput(outputID ID, size int64, write func(w io.Writer) (int64, error)) (Entry, error) {
	op := d.path("o", outputID)
	if fi, err := os.Stat(op); err == nil && fi.Size() == size {
		// Held already: read the body only to pass it by, unchecked (its
		// ID is the hash of what is kept).
		if _, err := write(io.Discard); err != nil {
			return Entry{}, err
		}
	} else if err := d.writeOutput(op, outputID, size, write); err != nil {
		return Entry{}, err
	}
	return Entry{OutputID: outputID, Size: size, Time: time.Now(), DiskPath: op}, nil
}

// putEntry is Put's second half: the entry naming e's output under
// actionID, which later gets find.
func (d *Dir) putEntry(actionID ID, e Entry) error {
	path := d.path("a", actionID)
	if e.Size == 0 && e.OutputID == emptyOutputID && d.linkEmptyEntry(path) == nil {
		return nil
	}
	// Another output's, or an entry to replace (a link does not).
	return d.writeFile(path, func(w io.Writer) error {
		_, err := w.Write(e.marshal())
		return err
	})
}

// emptyOutputID is the output ID of the empty output.
var emptyOutputID = ID(sha256.Sum256(nil))

// linkEmptyEntry makes path an entry of the empty output, a link to
// emptyEntry (made if need be). It fails if path exists.
func (d *Dir) linkEmptyEntry(path string) error {
	d.emptyMu.Lock()
	tmpl := d.emptyEntry
	if tmpl == "" {
		e := Entry{OutputID: emptyOutputID, Time: time.Now()}
		f, err := createTemp(filepath.Join(d.root, "tmp"))
		if err != nil {
			d.emptyMu.Unlock()
			return err
		}
		_, err = f.Write(e.marshal())
		if cerr := f.Close(); err != nil || cerr != nil {
			os.Remove(f.Name())
			d.emptyMu.Unlock()
			return errors.Join(err, cerr)
		}
		tmpl, d.emptyEntry = f.Name(), f.Name()
	}
	d.emptyMu.Unlock()
	err := os.Link(tmpl, path)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.Link(tmpl, path)
		}
	}
	return err
}

// writeOutput writes the output to path, hashing it as it goes.
func (d *Dir) writeOutput(path string, outputID ID, size int64, write func(w io.Writer) (int64, error)) error {
	return d.writeFile(path, func(w io.Writer) error {
		h := sha256.New()
		n, err := write(io.MultiWriter(w, h))
		if err != nil {
			return err
		}
		if n != size || !bytes.Equal(h.Sum(nil), outputID[:]) {
			return fmt.Errorf("%w: %d bytes (announced %d) hashing to %x, not %s", ErrMismatch, n, size, h.Sum(nil), outputID)
		}
		return nil
	})
}

// writeFile writes a file under tmp/ with write, then renames it to path.
// Every get from the remote writes two, so each syscall counts: the
// temporary file is removed only if it was not renamed, and path's
// directory is made only if the rename finds none.
func (d *Dir) writeFile(path string, write func(w io.Writer) error) (err error) {
	f, err := createTemp(filepath.Join(d.root, "tmp"))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err = rename(f.Name(), path); errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = rename(f.Name(), path)
		}
	}
	return err
}

// trimDue reports whether the last trim of the directory, by any
// program, is older than every (a walk of a large directory costs more
// than a go command should pay each time), and if so marks it done now.
func (d *Dir) trimDue(every time.Duration) bool {
	stamp := filepath.Join(d.root, "trimmed")
	if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < every {
		return false
	}
	now := time.Now()
	if err := os.Chtimes(stamp, now, now); os.IsNotExist(err) {
		os.WriteFile(stamp, nil, 0o644)
	}
	return true
}

// TrimResult says what a Trim did.
type TrimResult struct {
	Exclusive     bool  // it held the directory alone
	Before, After int64 // bytes in the directory
	Removed       int   // files removed
	RemovedTemp   int   // leftovers under tmp/ removed (a program that died mid-write)
}

// Trim brings the directory under max bytes if it is over: it removes
// files least recently used first down to nine tenths of max, under the
// directory's exclusive lock if it can take it at once (no other program
// has the directory open), or else only files unused for UnusedFor. The
// caller's own shared lock is given up for the try and taken again after.
func (d *Dir) Trim(max int64) (TrimResult, error) {
	var res TrimResult
	unlock(d.lock)
	res.Exclusive = tryLockExclusive(d.lock) == nil
	defer lockShared(d.lock) // downgrades, or takes back what was given up
	type file struct {
		path string
		size int64
		used time.Time
	}
	var files []file
	now := time.Now()
	for _, sub := range []string{"a", "o", "tmp"} {
		err := filepath.WalkDir(filepath.Join(d.root, sub), func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return nil // a directory removed under the walk: nothing to trim there
			}
			fi, err := de.Info()
			if err != nil {
				return nil
			}
			if sub == "tmp" {
				if now.Sub(fi.ModTime()) > UnusedFor && os.Remove(p) == nil {
					res.RemovedTemp++
				}
				return nil
			}
			files = append(files, file{p, fi.Size(), fi.ModTime()})
			res.Before += fi.Size()
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	res.After = res.Before
	if res.Before <= max {
		return res, nil
	}
	// Oldest first.
	slices.SortFunc(files, func(a, b file) int { return a.used.Compare(b.used) })
	target := max / 10 * 9
	for _, f := range files {
		if res.After <= target {
			break
		}
		if !res.Exclusive && now.Sub(f.used) < UnusedFor {
			break // every later one is younger still
		}
		if os.Remove(f.path) == nil {
			res.After -= f.size
			res.Removed++
		}
	}
	return res, nil
}
