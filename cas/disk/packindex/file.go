package packindex

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/membuf/membuf/cas/disk/fileio"
)

// SaveCheckpoint writes a checkpoint (WriteCheckpoint) to a temporary file
// in tmpDir, makes it durable and renames it to path, whose directory it
// then syncs: a crash leaves the old checkpoint or the new one, whole.
func SaveCheckpoint(path, tmpDir string, segs []Segment, shard func(i int, dst []Record) []Record) error {
	tmp, err := os.CreateTemp(tmpDir, "index-*.ckpt")
	if err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	defer tmp.Close()
	if err := WriteCheckpoint(tmp, segs, shard); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := fileio.Fdatasync(tmp); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	if err := fileio.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("disk: checkpoint: %w", err)
	}
	return nil
}

// CheckpointFile is a checkpoint's file being read.
type CheckpointFile struct {
	*CheckpointReader
	f *os.File
}

// OpenCheckpoint opens the checkpoint at path and reads its header. No
// file there is (nil, nil); one whose header does not check out is an
// error. The caller closes it.
func OpenCheckpoint(path string) (*CheckpointFile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := NewCheckpointReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &CheckpointFile{r, f}, nil
}

// Close closes the file.
func (c *CheckpointFile) Close() error { return c.f.Close() }
