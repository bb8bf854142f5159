package tier

import "github.com/membuf/membuf/cas"

// Uploads from memory: a blob of batchEntryBytes or less that arrives
// plain through the tier (a write, a batch) is copied, as it is written,
// into a buffer from Config.Pool, which the uploader hands to the backend
// instead of reading the blob back from the disk (a read that checks what
// it reads: a third of a packed upload's CPU, profiled). The bytes were
// checked against the digest by the disk's commit, which they passed
// before the buffer is handed on. The journal lists the entry all the
// same: after a crash the next start reads it back from the disk, as it
// does every entry not held (Config.UploadMemory full, a blob larger than
// a batch's entries, an upload suspended while it waited).

// defaultUploadMemory is Config.UploadMemory's default: four of a packed
// backend's batches of 16 MiB.
const defaultUploadMemory = 64 << 20

// holdable reports whether a blob of digest d, arriving as arrived, is
// held for its upload when the budget can hold it.
func holdable(d cas.Digest, arrived cas.Encoding) bool {
	return d.Hash != "" && d.Size > 0 && d.Size <= batchEntryBytes && arrived == cas.Uncompressed
}
