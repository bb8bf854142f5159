// Package index is the disk store's key-location map (after bb-storage's
// local KeyLocationMap): which entries exist, where each is (a file of
// its own, or a record in a pack segment), their recency, the store's
// accounting (entries, bytes, uploads in progress), and eviction under
// the maximum size, least recently used first, a file or a whole segment.
//
// It knows nothing of a blob's bytes: its commits and evictions return
// the file entries they dropped, whose files its owner removes, and
// copying a hot record forward is its owner's too. It has no lock: its
// owner holds its own around every call (the one package packs shares),
// so that a slot, an eviction and an index update are one step under it.
// Of the cache it imports cas, ages, packfile,
// packindex (the table of packed entries, off the Go heap) and packs;
// never package disk.
package index
