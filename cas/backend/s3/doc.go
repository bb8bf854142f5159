// Package s3 is the shared tier in a bucket of an S3-compatible object
// store (AWS S3, MinIO, Ceph RGW, Garage, GCS's interoperability API):
// Bucket, a tier.Backend, and Open, which puts it behind a local store
// with the tier machinery (package tier: the journal, the upload queue,
// fills, the existence cache).
//
//	local, _ := disk.OpenStore(dir, maxSize, logger)
//	loc, _ := s3.ParseURL("s3://bucket/prefix?endpoint=http://127.0.0.1:9000")
//	store, _ := s3.Open(ctx, local, s3.Config{Location: loc, Config: tier.Config{Dir: dir, Pool: pool}})
//	srv, _ := reapi.NewServer(store, reapi.Options{Pool: pool})
//	// on shutdown: srv.Close(); store.Close() (drains or journals the uploads); local.Close()
//
// Objects are named {prefix}cas/{hash} (the blob's raw bytes, so the
// object's SHA-256 checksum is the digest's hash) and {prefix}ac/{hash}
// (the serialized ActionResult, its SHA-256 in the object's metadata).
// docs/cas.md describes the design, what is durable where and when, and
// how each failure is answered.
//
// Its own module, so that the AWS SDK stays out of the others.
package s3

import (
	"cmp"
	"context"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

// Config configures an S3 tier: the bucket, and the tier machinery's
// settings (Open sets their Backend and Name).
type Config struct {
	// Location is the bucket (ParseURL reads it from the --s3 URL).
	Location Location
	// LookupConcurrency is how many HEADs one FindMissing sends at once,
	// and how many objects of one batch upload at once; 0 means 32.
	LookupConcurrency int
	tier.Config
}

// Open returns the tier of local in front of cfg.Location's bucket; see
// tier.Open.
func Open(ctx context.Context, local tier.Local, cfg Config) (*tier.Store, error) {
	b, err := NewBucket(ctx, cfg.Location, max(cmp.Or(cfg.LookupConcurrency, 32), cfg.UploadWorkers), cmp.Or(cfg.RequestTimeout, 30*time.Second))
	if err != nil {
		return nil, err
	}
	cfg.Config.Backend = b
	cfg.Config.Name = "s3"
	return tier.Open(ctx, local, cfg.Config)
}
