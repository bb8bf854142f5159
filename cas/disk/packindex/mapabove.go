package packindex

// mapAbove is the size from which a shard's slots are mapped outside the
// Go heap: smaller ones (a store's first few thousand records) would waste
// most of a page each.
const mapAbove = 64 << 10
