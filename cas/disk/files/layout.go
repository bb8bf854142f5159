package files

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// The files of blobs live under a store's directory, in one directory per
// namespace (kind) and digest function: cas/ and ac/ for SHA-256,
// cas-{function}/ and ac-{function}/ for the others (cas-blake3/,
// ac-sha512/), so that a SHA-256 blob's path is what it was when SHA-256
// was the only function, and a blob of one function is never found under
// another's name even with the same hex. Each is sharded by the first two
// hex digits of the hash:
//
//	{kind}/ab/ab12...            a blob kept plain, named by its hash
//	{kind}/ab/ab12...-{size}.zst a blob kept compressed (zstdseek), its size in the name
//
// so that a start rebuilds the index from the names and sizes alone.

// Path is where the blob of kind (its directory) and hash is kept plain
// under dir.
func Path(dir, kind, hash string) string {
	return filepath.Join(dir, kind, hash[:2], hash)
}

// ZstdPath is where the blob of kind and hash, of size bytes, is kept
// compressed under dir.
func ZstdPath(dir, kind, hash string, size int64) string {
	return Path(dir, kind, hash) + "-" + strconv.FormatInt(size, 10) + ".zst"
}

// MakeDir creates directory dir in fsys, and the parents it lacks, and
// makes each it created durable (syncs its parent): the directory a first
// start made must outlive a crash of the machine with the blobs in it.
func MakeDir(fsys vfs.FS, dir string) error {
	err := fsys.Mkdir(dir)
	if errors.Is(err, fs.ErrNotExist) && filepath.Dir(dir) != dir {
		if err := MakeDir(fsys, filepath.Dir(dir)); err != nil {
			return err
		}
		err = fsys.Mkdir(dir)
	}
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(dir))
}

// MakeDirs creates in fsys under dir the directories plain and the 256
// shard directories of each of kinds that are missing, and syncs the
// parents of those it created, so that a commit never has to create (and
// make durable) a directory before its rename.
func MakeDirs(fsys vfs.FS, dir string, plain, kinds []string) error {
	for _, sub := range append(slices.Clip(plain), kinds...) {
		if err := fsys.Mkdir(filepath.Join(dir, sub)); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	for _, kind := range kinds {
		top := filepath.Join(dir, kind)
		created := false
		for i := range 256 {
			err := fsys.Mkdir(filepath.Join(top, fmt.Sprintf("%02x", i)))
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			created = created || err == nil
		}
		if created {
			if err := fsys.SyncDir(top); err != nil {
				return err
			}
		}
	}
	return fsys.SyncDir(dir)
}

// RemoveTemps deletes whatever is in tmpDir of fsys: uploads a previous
// run (or this one, at Close) never completed.
func RemoveTemps(fsys vfs.FS, tmpDir string, log *slog.Logger) error {
	ents, err := fsys.ReadDir(tmpDir)
	if err != nil {
		return fmt.Errorf("disk: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(tmpDir, e.Name())
		if err := fsys.RemoveAll(p); err != nil {
			return fmt.Errorf("disk: removing stray temporary file: %w", err)
		}
		log.Info("removed stray temporary file", "path", p)
	}
	return nil
}

// Dir is a directory of blobs' files, for Load.
type Dir struct {
	Name       string       // under the store's directory: cas, ac-blake3
	Fn         cas.Function // the function whose hashes name its files
	Compressed bool         // its blobs may be kept compressed
}

// Found is a blob's file found at start.
type Found struct {
	Dir     int // the index in Load's dirs of the directory it is in
	Hash    string
	Size    int64 // the blob's own
	Stored  int64 // the file's
	Zstd    bool
	ModTime time.Time
}

// Load lists the blobs' files of each of dirs (those missing: none) under dir in fsys, oldest
// modification first. A name that is no blob's of its directory's function
// (or a compressed file where its directory keeps none) is logged and left
// alone.
func Load(fsys vfs.FS, dir string, dirs []Dir, log *slog.Logger) ([]Found, error) {
	var all []Found
	for di, d := range dirs {
		root := filepath.Join(dir, d.Name)
		shards, err := fsys.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a function never stored: its directory is made at its first file
		}
		if err != nil {
			return nil, fmt.Errorf("disk: %w", err)
		}
		for _, shard := range shards {
			if !shard.IsDir() {
				log.Warn("ignoring unexpected file in store", "path", filepath.Join(root, shard.Name()))
				continue
			}
			ents, err := fsys.ReadDir(filepath.Join(root, shard.Name()))
			if err != nil {
				return nil, fmt.Errorf("disk: %w", err)
			}
			for _, f := range ents {
				name := f.Name()
				hash, size, zstd, ok := ParseName(d.Fn, name)
				if !ok || zstd && !d.Compressed || hash[:2] != shard.Name() || !f.Type().IsRegular() {
					log.Warn("ignoring unexpected file in store", "path", filepath.Join(root, shard.Name(), name))
					continue
				}
				info, err := f.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("disk: %w", err)
				}
				if !zstd {
					size = info.Size()
				}
				all = append(all, Found{Dir: di, Hash: hash, Size: size, Stored: info.Size(), Zstd: zstd, ModTime: info.ModTime()})
			}
		}
	}
	slices.SortFunc(all, func(a, b Found) int { return a.ModTime.Compare(b.ModTime) })
	return all, nil
}
