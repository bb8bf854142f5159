// Package reapi serves a [cas.Storage] over gRPC as the Remote Execution
// API's cache services (ContentAddressableStorage, ActionCache,
// Capabilities) and ByteStream: the [Server], its [Options], and the gRPC
// server options ([ServerOptions]) of its zero-copy data path.
//
// ByteStream's data path moves blob bytes without copying them when the
// gRPC server is made with ServerOptions and the Server's Options.Pool is
// the same pool: Read sends pooled chunks to gRPC by reference, and Write
// keeps references into the frames gRPC received (see grpcmem and
// docs/zerocopy.md). A Server registered on a plain grpc.Server serves every
// RPC the same way through the proto codec, copying. Uploads are bounded in
// memory (an in-flight byte budget, stream windows, a stall timeout) and
// may be resumed.
//
// It owns the protocols' rules (resource names, offsets, batch limits,
// error codes; docs/cas.md) and imports cas, access, actionresult, fastcdc
// and zstdseek, never a Storage implementation: the disk store and the S3
// tier are given to NewServer. It also serves the Remote Asset API's Fetch
// and Push (docs/remoteasset.md) and blob splitting and splicing
// (docs/chunking.md). The HTTP cache protocol (package httpcache) sits
// beside it, over the same Storage.
package reapi
