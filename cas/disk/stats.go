package disk

// Stats is a snapshot of a Store's counters. Lookups are counted by a
// decorator around the store (decorator.CountLookups), not here: the
// store cannot tell a client's lookup from the server's own check.
type Stats struct {
	Blobs         int64 // CAS blobs stored (the empty blob is not stored)
	ActionResults int64 // action cache entries stored
	Bytes         int64 // bytes of blobs and action results on disk
	PartialBytes  int64 // bytes reserved by uploads in progress or kept for resumption; Bytes + PartialBytes stays under MaxBytes
	// UncompressedBytes is what Bytes would be if no blob were kept
	// compressed; the difference is what compression saves.
	UncompressedBytes int64
	CompressedBlobs   int64 // blobs kept compressed on disk
	MaxBytes          int64 // the configured maximum size; 0 means no limit
	Evictions         int64 // entries removed to stay under MaxBytes
	Corrupt           int64 // blobs found not to match their name when re-hashed (first read, scrubber), and removed
	VerifiedBytes     int64 // bytes of stored blobs re-hashed (first reads after start, scrubber)
	ScrubPasses       int64 // passes of the scrubber over every blob completed
	ScrubListings     int64 // shard directories the scrubber listed (256 a pass)
	Commits           int64 // blobs and action results committed to disk
	CommitBatches     int64 // group commits that made them durable: Commits/CommitBatches is the batch size
}
