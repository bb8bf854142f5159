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
// The services are in packages a reader finds by name:
//
//	reapi                  Server, Options, Register; CAS (casservice.go, inplacebatches.go, treewalk.go),
//	                       action cache, capabilities, ByteStream (bytestream.go, zstdupload.go, resourcename.go),
//	                       ServerOptions (zerocopy.go), requests that do not parse (malformed.go)
//	reapi/asset            the Remote Asset API's Fetch and Push (docs/remoteasset.md)
//	reapi/chunking         blob splitting and splicing, the CAS service's chunk RPCs (docs/chunking.md)
//	reapi/internal/upload  the upload budget, the uploads kept for resumption, a Write stream's receiver and stall timer
//	reapi/internal/rpcstatus  a store's error as a gRPC status, for every service alike
//
// The Server makes the asset and chunking services and registers them
// with its own; they share its upload budget, its access control
// (authorize.go, over access.Control.Authorize) and rpcstatus, and never
// import reapi. It owns the protocols' rules (resource names, offsets,
// batch limits, error codes; docs/cas.md) and imports cas, access,
// actionresult, zstdseek and its own packages, never a Storage implementation:
// the disk store and the S3 tier are given to NewServer. The HTTP cache
// protocol (package httpcache) sits beside it, over the same Storage.
package reapi
