package disk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/disktest"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/serveprocess"
)

// fullFS is the operating system's file system whose disk can be made
// full: while it is, every write fails with ENOSPC, as a write that needs
// new blocks does on a full disk. It counts the files open through it.
type fullFS struct {
	vfs.FS
	full atomic.Bool
	open atomic.Int64
}

func (f *fullFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	f.open.Add(1)
	return &fullFile{File: file, fs: f}, nil
}

func (f *fullFS) Open(name string) (vfs.File, error) { return f.wrap(f.FS.Open(name)) }
func (f *fullFS) OpenReadWrite(name string) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name))
}
func (f *fullFS) OpenAppend(name string) (vfs.File, error) { return f.wrap(f.FS.OpenAppend(name)) }
func (f *fullFS) Create(name string) (vfs.File, error)     { return f.wrap(f.FS.Create(name)) }
func (f *fullFS) CreateTemp(dir, pattern string) (vfs.File, error) {
	return f.wrap(f.FS.CreateTemp(dir, pattern))
}

type fullFile struct {
	vfs.File
	fs     *fullFS
	closed atomic.Bool
}

func (f *fullFile) noSpace() error {
	return &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

func (f *fullFile) Write(p []byte) (int, error) {
	if f.fs.full.Load() {
		return 0, f.noSpace()
	}
	return f.File.Write(p)
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.full.Load() {
		return 0, f.noSpace()
	}
	return f.File.WriteAt(p, off)
}

func (f *fullFile) WriteBuffers(bufs [][]byte) (int, error) {
	if f.fs.full.Load() {
		return 0, f.noSpace()
	}
	return f.File.WriteBuffers(bufs)
}

func (f *fullFile) WriteBuffersAt(bufs [][]byte, off int64) (int, error) {
	if f.fs.full.Load() {
		return 0, f.noSpace()
	}
	return f.File.WriteBuffersAt(bufs, off)
}

func (f *fullFile) Close() error {
	if !f.closed.Swap(true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// packFiles returns the names of the files in the store's packs/.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, packDirName))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range ents {
		names = append(names, de.Name())
	}
	return names
}

// A disk that is full fails every write, and the writes leave nothing
// behind: no pack segment for a record that could not be written, no
// descriptor held for one. Once space returns the store writes again,
// without a restart, and a start removes the empty segments an older
// version left, however many.
func TestAFullDiskLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	fsys := &fullFS{FS: vfs.Default}
	const maxSize = 256 << 20
	s, err := OpenStore(dir, maxSize, nil, WithFS(fsys))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := testblob.Random(4<<10, 1)
	if err := cas.Put(ctx, s, cas.DigestOf(before), before, cas.Uncompressed); err != nil {
		t.Fatal(err)
	}
	opened := fsys.open.Load()

	fsys.full.Store(true)
	const writers, perWriter = 16, 60
	var wg sync.WaitGroup
	var stored atomic.Int64
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				data := testblob.Random(4<<10+i, uint64(w*perWriter+i+100))
				d := cas.DigestOf(data)
				var err error
				switch i % 4 {
				case 0: // streamed
					err = cas.Put(ctx, s, d, data, cas.Uncompressed)
				case 1: // in a batch
					err = s.PutBatch(ctx, []cas.Digest{d}, []net.Buffers{{data}}, []cas.Encoding{cas.Uncompressed})[0]
				case 2: // an action result
					err = s.PutActionResult(ctx, d, data)
				case 3: // a file of its own
					big := testblob.Random(int(DefaultPackMax)+1+i, uint64(w*perWriter+i+100))
					err = cas.Put(ctx, s, cas.DigestOf(big), big, cas.Uncompressed)
				}
				if err == nil {
					stored.Add(1)
				} else if !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("a write to a full disk: %v; want an error saying ENOSPC", err)
				}
			}
		})
	}
	wg.Wait()
	if n := stored.Load(); n > 0 {
		t.Errorf("%d writes to a full disk succeeded", n)
	}
	// What the writes may leave: the store's active segments, one a lane
	// and one for action results, and the spare files.
	if names := packFiles(t, dir); len(names) > streamLanes+3 {
		t.Errorf("%d writes to a full disk left %d files in packs/: %q", writers*perWriter, len(names), names)
	}
	if n := fsys.open.Load(); n > opened+streamLanes+3 {
		t.Errorf("after %d writes to a full disk the store holds %d files open, %d before", writers*perWriter, n, opened)
	}

	fsys.full.Store(false)
	after := testblob.Random(4<<10, 2)
	if err := cas.Put(ctx, s, cas.DigestOf(after), after, cas.Uncompressed); err != nil {
		t.Fatalf("a write once space returned: %v", err)
	}
	for _, data := range [][]byte{before, after} {
		if got, err := cas.ReadAll(ctx, s, cas.DigestOf(data)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("reading back %d bytes: %d bytes, %v", len(data), len(got), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Empty segments as an older version left them, on a full disk, by
	// the thousand: a start removes them and holds no descriptor for them.
	const leftovers = 2000
	for i := range leftovers {
		name := filepath.Join(dir, packDirName, fmt.Sprintf("%016x.open", 1<<20+i))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fsys.open.Store(0)
	s, err = OpenStore(dir, maxSize, nil, WithFS(fsys))
	if err != nil {
		t.Fatalf("a start with %d empty segments: %v", leftovers, err)
	}
	defer s.Close()
	if names := packFiles(t, dir); len(names) > streamLanes+3 {
		t.Errorf("after a start, %d files in packs/", len(names))
	}
	if n := fsys.open.Load(); n > 2*(streamLanes+3) {
		t.Errorf("after a start, the store holds %d files open", n)
	}
	for _, data := range [][]byte{before, after} {
		if got, err := cas.ReadAll(ctx, s, cas.DigestOf(data)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after a start, reading back %d bytes: %d bytes, %v", len(data), len(got), err)
		}
	}
}

// Rot found in many blobs at once is logged a line of a kind a second,
// not a line a blob: the store's warnings and errors are rate-limited.
func TestCorruptBlobsAreLoggedAtABoundedRate(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 0, nil, WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ds []cas.Digest
	for i := range 40 {
		data := testblob.Random(8<<10, uint64(i))
		d := cas.DigestOf(data)
		if err := cas.Put(ctx, s, d, data, cas.Uncompressed); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		disktest.FlipByte(t, disktest.BlobPath(dir, d), 100, true)
	}
	var logs serveprocess.LockedBuffer // the store logs from several goroutines
	s, err = OpenStore(dir, 0, slog.New(slog.NewTextHandler(&logs, nil)), WithPacks(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, d := range ds {
		if _, err := cas.ReadAll(ctx, s, d); !errors.Is(err, cas.ErrNotFound) {
			t.Fatalf("reading a rotten blob: %v; want not found", err)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n == 0 || n > 2 {
		t.Errorf("%d rotten blobs read in well under a second logged %d error lines; want 1 or 2:\n%s", len(ds), n, logs.String())
	}
}
