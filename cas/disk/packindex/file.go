package packindex

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/membuf/membuf/cas/disk/vfs"
)

// SaveCheckpoint writes a checkpoint (WriteCheckpoint) to a temporary file
// in tmpDir of fsys, makes it durable and renames it to path, whose
// directory it then syncs: a crash leaves the old checkpoint or the new
// one, whole.
func SaveCheckpoint(fsys vfs.FS, path, tmpDir string, segs []Segment, shard func(i int, dst []Record) []Record) error {
	tmp, err := fsys.CreateTemp(tmpDir, "index-*.ckpt")
	if err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	defer fsys.Remove(tmp.Name()) // after the rename, nothing
	defer tmp.Close()
	if err := WriteCheckpoint(tmp, segs, shard); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := tmp.Datasync(); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := fsys.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	return nil
}

// CheckpointFile is a checkpoint's file being read.
type CheckpointFile struct {
	*CheckpointReader
	f vfs.File
}

// OpenCheckpoint opens the checkpoint at path in fsys and reads its
// header. No file there is (nil, nil); one whose header does not check
// out is an error. The caller closes it.
func OpenCheckpoint(fsys vfs.FS, path string) (*CheckpointFile, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewCheckpointReader(io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &CheckpointFile{r, f}, nil
}

// Close closes the file.
func (c *CheckpointFile) Close() error { return c.f.Close() }
