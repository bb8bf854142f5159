// Package gcs is a tier.Backend on a Google Cloud Storage bucket, through
// cloud.google.com/go/storage: the shared tier of many membuf serve nodes
// (--upstream gs://BUCKET/PREFIX).
//
// An entry is an object named as the S3 tier names it, {prefix}cas/{hash}
// for a blob and {prefix}ac/{hash} for an action result, with the
// Upload's SHA-256 in its user metadata (sha256) and given back as
// Object.SHA256. Credentials are Application Default Credentials; with an
// endpoint (an emulator such as fake-gcs-server) there are none.
//
// Its own module, so that the Google client libraries stay out of the
// others; it imports cas, cas/tier and cas/backend/internal/objstore.
package gcs
