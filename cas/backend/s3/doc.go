// Package s3 is a shared tier's backend in a bucket of an S3-compatible
// object store (AWS S3, MinIO, Ceph RGW, Garage, GCS's interoperability
// API): ParseURL reads an s3:// URL, New makes the Backend, a
// tier.Backend, which tier.Open puts behind a local store.
//
//	loc, _ := s3.ParseURL("s3://bucket/prefix?endpoint=http://127.0.0.1:9000")
//	b, _ := s3.New(ctx, s3.Config{Location: loc})
//	store, _ := tier.Open(ctx, local, tier.Config{Backend: b, Name: "s3", Dir: dir, Pool: pool})
//
// Objects are named {prefix}cas/{hash} (the blob's raw bytes, so the
// object's SHA-256 checksum is the digest's hash) and {prefix}ac/{hash}
// (the serialized ActionResult, its SHA-256 in the object's metadata).
// docs/cas.md describes the design, what is durable where and when, and
// how each failure is answered.
//
// It speaks S3 on net/http, signing with SigV4 itself, and finds
// credentials as the AWS SDKs do, without linking one (client.go says
// why).
package s3
