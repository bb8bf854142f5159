// Package cas is the vocabulary of the content-addressed blob cache for
// remote builds that `membuf serve` runs: the [Digest] a blob is named by
// (its SHA-256 and size), the [Storage] contract every tier implements
// and every protocol serves from ([BlobStore] and [ActionCache], with its
// [BlobReader] and [BlobWriter]), the helpers over it ([ReadAll], [Put],
// [Contains], [Resolve]), and the errors a Storage returns.
//
// The cache is split by concern into packages below this one; imports run
// one way, down this list:
//
//	cas/reapi         the gRPC services over any Storage: REAPI CAS, action cache, capabilities, ByteStream; it registers the two below
//	cas/reapi/asset   the Remote Asset API's Fetch and Push
//	cas/reapi/chunking  blob splitting and splicing (the CAS service's four chunk RPCs)
//	cas/httpcache     the HTTP/1.1 cache protocol (/cas/, /ac/) over any Storage, beside reapi
//	cas/backend/...   the shared tier's backends (cas/backend/s3: an S3-compatible bucket), each a tier.Backend
//	cas/tier          a Storage of two tiers: a local store in front of a shared Backend (the journal, uploads, fills)
//	cas/disk          the disk Storage: files, pack segments, index, group commit, integrity checks, the scrubber
//	cas/decorator     what is cross-cutting about a store, each a type around a Storage
//	cas/storagetest   the conformance suite every Storage passes
//	cas/actionresult  what is checked in an action result before it is stored or served
//	cas/access        who a caller is and what the policy lets it do
//	cas/fastcdc       content-defined chunking, for blob splitting
//	cas/zstdseek      the seekable zstd format and the zstd coders' memory budget
//	cas               this package: names and interfaces only
//
// This package imports no other package of the cache: it must not know of
// disks, buckets, gRPC services or access rules. A crash at any moment
// leaves only complete, verified blobs in every Storage; what each
// implementation does where the specification leaves a choice is set out
// in docs/cas.md.
package cas
