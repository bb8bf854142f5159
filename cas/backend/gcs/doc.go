// Package gcs is a tier.Backend on a Google Cloud Storage bucket: the
// shared tier of many membuf serve nodes (--upstream gs://BUCKET/PREFIX).
//
// An entry is an object named as the S3 tier names it, {prefix}cas/{hash}
// for a blob and {prefix}ac/{hash} for an action result, with the
// Upload's SHA-256 in its user metadata (sha256) and given back as
// Object.SHA256. Credentials are Application Default Credentials
// (golang.org/x/oauth2/google); with an endpoint (an emulator such as
// fake-gcs-server) there are none.
//
// It speaks Cloud Storage's XML (reads) and JSON (the rest) APIs on
// net/http rather than through cloud.google.com/go/storage, whose gRPC,
// xDS and monitoring dependencies cost every membuf serve process
// megabytes of memory at start, whether or not it has a bucket.
//
// Its own module, so that its dependencies stay out of the others; it
// imports cas, cas/tier and cas/backend/internal/objstore.
package gcs
