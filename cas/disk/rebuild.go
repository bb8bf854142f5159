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

// rebuild fills the index from the directories of blobs' files, oldest
// modification first, and from the pack segments (the checkpoint's
// records, and a scan of the segments it does not cover).
func (s *Store) rebuild() error {
	x := s.idx
	found, err := files.Load(s.fs, s.dir, blobDirs, s.log)
	if err != nil {
		return err
	}
	for _, k := range blobDirKeys {
		if k.Fn == cas.SHA256 {
			s.blobFiles.madeDirs[k.Kind][k.Fn].Store(true) // at start
		}
	}
	all := make([]*entry, len(found))
	for i, f := range found {
		k := blobDirKeys[f.Dir]
		s.blobFiles.madeDirs[k.Kind][k.Fn].Store(true)
		k.Hash = f.Hash
		e := &entry{Key: k, Size: f.Size, Stored: f.Stored, Zstd: f.Zstd}
		all[i] = e
		if el, ok := x.File(e.Key); ok {
			// Kept both ways: a crash between a commit's rename and its
			// removal of the other form. Both were checked; keep the
			// newer.
			s.log.Info("blob stored both plain and compressed: keeping the newer", "hash", el.Key.Hash)
			s.blobFiles.remove(el)
			x.Drop(el)
		}
		x.Insert(e)
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
	// Recency: files' last modification and segments' order, on one clock.
	modTimes := make([]time.Time, len(found))
	for i, f := range found {
		modTimes[i] = f.ModTime
	}
	x.Order(all, modTimes, s.segments.Segments())
	if ck != nil {
		var replaced []entry
		records, replaced, s.checkpointLoaded, err = s.checkpoints.LoadRecords(ck, records)
		s.blobFiles.removeAll(replaced)
		if err != nil {
			return err
		}
	}
	// Records in segment order: a later record of a key replaces an
	// earlier one (an action result updated, a blob written again), and a
	// packed entry replaces a file of the same key (written since).
	for _, r := range records {
		fn := cas.Function(r.Fn)
		if entryKind(r.Kind) > kindAC || !fn.Valid() || fn.Size() != int(r.HashLen) {
			s.log.Warn("ignoring a pack record of unknown kind or digest function", "segment", r.Seg.Seq, "kind", r.Kind, "function", r.Fn, "hash_bytes", r.HashLen)
			continue
		}
		k := entryKey{Kind: entryKind(r.Kind), Fn: fn, Hash: r.HashHex()}
		if el, ok := x.File(k); ok {
			s.blobFiles.remove(el)
			x.Drop(el)
		} else if old, ok := x.Packed(k); ok {
			if old.Seg.Seq > r.Seg.Seq {
				continue // from the checkpoint, of a later segment
			}
			x.Count(&old, -1)
		}
		e := &entry{Key: k, Size: r.Size, Stored: r.Size, Seg: r.Seg, Off: r.Off, CRC: r.DataCRC}
		x.PutRecord(e)
		x.Count(e, 1)
	}
	return nil
}
