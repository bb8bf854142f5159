// Package s3tier is a cas.Storage made of two tiers: a local disk store
// (disk.Store, bounded by its maximum size) in front of a bucket of an
// S3-compatible object store (AWS S3, MinIO, Ceph RGW, Garage, GCS's
// interoperability API), shared by every node that points at it.
//
//	local, _ := disk.OpenStore(dir, maxSize, logger)
//	loc, _ := s3tier.ParseURL("s3://bucket/prefix?endpoint=http://127.0.0.1:9000")
//	store, _ := s3tier.Open(ctx, local, s3tier.Config{Location: loc, Dir: dir, Pool: pool})
//	srv, _ := reapi.NewServer(store, reapi.Options{Pool: pool})
//	// on shutdown: srv.Close(); store.Close() (drains or journals the uploads); local.Close()
//
// Reads are served from disk when the blob is there. A miss streams one GET
// of the whole object: its bytes go to the client by reference, in pooled
// chunks, and into a disk upload that commits only if the SHA-256 matches.
// Writes commit to disk first, are recorded in a durable journal, and are
// uploaded by a bounded background queue (or before Write returns, in
// write-through mode). FindMissing asks the bucket only about the local
// misses, concurrently, through a short-lived cache. Action results are
// stored in the bucket too.
//
// Objects are named {prefix}cas/{hash} (the blob's raw bytes, so the
// object's SHA-256 checksum is the digest's hash) and {prefix}ac/{hash}
// (the serialized ActionResult). docs/cas.md describes the design, what is
// durable where and when, and how each failure is answered.
//
// It imports cas and disk, never a protocol (reapi): it is served, as any
// cas.Storage is, by whatever protocol is put in front of it.
package s3tier
