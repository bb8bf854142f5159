// Package grpcmem connects membuf to grpc-go without copying payloads: a
// bridge between membuf's [membuf.Buffer] and [membuf.Slice] and grpc-go's
// mem.Buffer and mem.BufferSlice, and a server codec for the ByteStream
// service that sends pooled chunks by reference and receives written data as
// references into the frames gRPC read.
//
// # Ownership
//
// Every conversion takes over the reference it is given and returns one
// reference: the caller gives up what it passed in and owns what it gets
// back. Releasing the result (its last view) releases the input. No
// conversion copies a payload, except [ToGRPC] for buffers that grpc-go would
// not reference-count (1 KiB or less of capacity), which it copies and frees
// at once; see [ToGRPC].
//
// See docs/grpcmem.md for the design, the wire format and what this package
// relies on grpc-go to do.
package grpcmem
