// Package packed is a tier.Backend that keeps an object store's small
// entries many to an object: packs in the bucket. A Put's entries of
// PackEntryBytes or less go up as one pack object (their records back to
// back) and one small index object naming each record (key, offset,
// size), under a time-ordered prefix; larger entries stay one object each
// in the store's per-object layout (Config.Objects), named in the index
// too. Every node lists the index prefix every RefreshEvery and keeps the
// records in a pointer-free table, so Stat answers without a request; a
// read of a packed entry is one ranged GET.
//
//	{prefix}packs/data/{unix-nanos}-{random}    a pack: records back to back
//	{prefix}packs/index/{unix-nanos}-{random}   its index (index.go), written after it
//	{prefix}cas/{hash}, {prefix}ac/{hash}       the per-object layout, as before
//
// It serves every object store through Bucket, which each store's
// backend implements beside its tier.Backend (cas/backend/s3). What is
// not in the table is looked for in the per-object layout, so a bucket
// written before packs is still read. A pack that is gone or too short
// reads as a miss, never an error or wrong bytes: the tier checks a
// blob's bytes against its name, and an action result's against the
// SHA-256 stored before it in the pack.
//
// With a Retention (Config.Retention), packs and their indexes older than
// it are deleted by a janitor every node runs (Evict), with no
// coordination, and a record read from a pack older than half of it is
// copied forward into a new pack first (evict.go, forward.go): the
// bucket holds about a Retention of writes, and what is read at least
// once per half Retention stays. With Config.ReadAheadBytes, a read of
// one record of a pack reads the whole pack in the background and hands
// its other records to a sink (SetReadAhead: the tier's disk), so that a
// cold node's reads of its neighbours are local (readahead.go).
// A node that starts reads the newest snapshot of the records that a
// node wrote (snapshot.go) and the indexes after it, not every index.
// docs/packs.md has the design.
//
// It imports cas, cas/tier and its own packages (packtable: the table;
// snapshot: the snapshots' format), and no object store's client.
package packed
