package packtable

// mapAbove is the size from which a shard's slots are mapped outside the
// Go heap: a page. The table has 256 shards, so heap slices up to 64 KiB
// (as the disk's index has them) would leave up to 80 MB of the Go heap's
// garbage behind as they grow, 80 bytes a record at a million.
const mapAbove = 4 << 10
