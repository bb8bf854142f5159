// Package objstore is what the object-store backends of a tier
// (cas/backend/s3, gcs, azure) share and nothing else: how an
// entry's object is named and where its checksum is kept, the check of a
// key prefix, an upload body read to exactly its size, a transfer that
// stops making progress cut off, a request sent with its one quick retry
// (Send), the first of many requests' errors, an answer that is not a
// success (APIError), and a client library's error made safe to log.
//
// It imports cas and cas/tier only, and no client library: the backends
// speak their stores' HTTP APIs on net/http.
package objstore
