package disk

// Every read is checked. verify.go makes sure a blob matched its name once
// in this process (SHA-256); that says nothing of the disk since: a bit
// that rots afterwards, leaving the modification time alone, would be
// served until the scrubber came round, which on a large store takes a
// day. So each stored blob also carries CRC-32Cs of its stored bytes, taken
// when they were hashed (on their way in, or by that first check), and
// every read checks what it read against them before it hands on a byte:
//
//   - a packed blob (at most --pack-max, 1 MiB) is checked against its
//     record's CRC, which the record header holds anyway: a read reads
//     the whole record into one pooled buffer and checks it before any of
//     it is sent (as views of that buffer) or copied out;
//   - a blob in a file of its own has one CRC per integrity.Block bytes,
//     kept in its index entry; reads go in whole blocks, each checked
//     before any of it is sent (integrity.File).
//
// Why a CRC and not SHA-256: package integrity's doc. A block that does
// not match
// removes the blob, as a failed first check does (StoreStats.Corrupt, an
// error in the log), and the read fails with an error wrapping
// ErrNotFound: no read sends a wrong byte, from a file or from a record.
// FindMissingBlobs then reports the blob missing and clients upload it
// again. ErrNotFound, NOT_FOUND on the wire, because that is what makes
// clients recover: Bazel and the REAPI SDK take it as a cache miss and run
// the action, then upload its outputs; DATA_LOSS, the code for corruption,
// fails a Bazel build.
//
// A blob kept compressed has block sums of its file as stored (frames and
// seek table), taken as the file was written or by the first check: a
// compressed read, which sends the stored frames as they are, reads them
// in checked blocks (zstdfile.StoredReader); a plain read decompresses,
// and zstd checks each frame's own checksum (every frame this store
// writes has one), so a damaged frame fails the read there, and removes
// the blob (zstdfile.Blob.SetCorruptHandler).
//
// WithoutReadChecks turns this off, for a filesystem that checksums its own
// data (ZFS, btrfs): reads then trust what the first check found.

// WithoutReadChecks makes reads trust the disk once a blob has matched its
// name in this process, instead of checking each block read against the
// CRC-32C taken when it was hashed. For a filesystem that checksums its
// data itself (ZFS, btrfs), where the check would be paid twice.
func WithoutReadChecks() StoreOption {
	return func(s *Store) { s.noReadChecks = true }
}

// readFailed is what a read does when what it read does not match its
// sums: removes the entry opened (a copy of the index entry, taken when it
// was opened) if it is still that entry, counts and logs it, and returns
// errCorrupt for the read to fail with.
func (s *Store) readFailed(opened entry, detail string) error {
	s.mu.Lock()
	removed := false
	if s.isCurrentLocked(opened) {
		cur, _ := s.entryLocked(opened.key)
		if cur.seg == nil {
			s.removeLocked(s.files[opened.key])
		} else {
			s.dropLocked(&cur)
		}
		s.corrupt++
		removed = true
	}
	s.mu.Unlock()
	if removed {
		s.log.Error("blob failed the check of a read: removed", "hash", opened.key.hash, "kind", opened.key.kind, "size", opened.size, "packed", opened.seg != nil, "detail", detail)
		if opened.seg != nil {
			s.retireRecord(opened)
		}
	}
	return errCorrupt
}
