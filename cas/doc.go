// Package cas is a content-addressed blob cache for remote builds: a disk
// [Store] of blobs named by their SHA-256 digest and of action results, and
// a [Server] that serves it over gRPC as the Remote Execution API's cache
// services (ContentAddressableStorage, ActionCache, Capabilities) and
// ByteStream. `membuf serve` is this package behind a command line.
//
// A blob becomes visible in the Store only once its size and hash have
// been checked and it has been fsynced and renamed into place, so a crash
// leaves only complete, verified blobs; the Store evicts the least recently
// used entries to stay under its maximum size.
//
// ByteStream's data path moves blob bytes without copying them when the
// gRPC server is made with [ServerOptions] and the Server's Options.Pool is
// the same pool: Read sends pooled chunks to gRPC by reference, and Write
// keeps references into the frames gRPC received (see grpcmem and
// docs/zerocopy.md). A Server registered on a plain grpc.Server serves every
// RPC the same way through the proto codec, copying.
//
// What the server does where the specification leaves a choice (instance
// names, resource name forms, resumable uploads, error codes) is set out in
// docs/cas.md.
package cas
