package disk

import (
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/index"
)

// The store's directories of blobs' files: one per kind and digest
// function (index.Key.Dir), listed at start (files.Load): SHA-256's,
// made at start (OpenStore), and those of the other functions, made at
// their first file (blobFiles.makeDir). blobDirKeys[i] is the kind and
// function of blobDirs[i]'s files.
var blobDirs, blobDirKeys = func() (dirs []files.Dir, keys []entryKey) {
	for _, k := range index.Dirs() {
		dirs = append(dirs, files.Dir{Name: k.Dir(), Fn: k.Fn, Compressed: k.Kind == kindCAS})
		keys = append(keys, k)
	}
	return dirs, keys
}()

// rebuild fills the index from the pack segments (the checkpoint's
// records, and a scan of the segments it does not cover) and the
// directories of blobs' files, oldest modification first, and removes the
// files of entries that others replaced.
func (s *Store) rebuild() error {
	found, err := files.Load(s.fs, s.dir, blobDirs, s.log)
	if err != nil {
		return err
	}
	ck, err := s.checkpoints.Open()
	if err != nil {
		s.log.Warn("ignoring the index checkpoint: scanning every pack segment", "err", err)
	}
	var trusted map[uint64]int64
	if ck != nil {
		trusted = ck.Segments
	}
	records, err := s.segments.Load(trusted)
	if err != nil {
		if ck != nil {
			ck.Close()
		}
		return err
	}
	for _, k := range blobDirKeys {
		if k.Fn == cas.SHA256 {
			s.blobFiles.madeDirs[k.Kind][k.Fn].Store(true) // at start
		}
	}
	all := make([]*entry, len(found))
	modTimes := make([]time.Time, len(found))
	for i, f := range found {
		k := blobDirKeys[f.Dir]
		s.blobFiles.madeDirs[k.Kind][k.Fn].Store(true)
		k.Hash = f.Hash
		all[i], modTimes[i] = &entry{Key: k, Size: f.Size, Stored: f.Stored, Zstd: f.Zstd}, f.ModTime
	}
	s.blobFiles.removeAll(s.idx.LoadFiles(all, modTimes))
	if ck != nil {
		var replaced []entry
		records, replaced, s.checkpointLoaded, err = s.checkpoints.LoadRecords(ck, records)
		s.blobFiles.removeAll(replaced)
		if err != nil {
			return err
		}
	}
	s.blobFiles.removeAll(s.idx.LoadRecords(records))
	return nil
}
