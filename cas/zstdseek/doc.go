// Package zstdseek is the seekable zstd format the cache keeps compressed
// blobs in, and the coders that read and write it under a memory budget:
// independent frames of FrameSize uncompressed bytes followed by a seek
// table (facebook/zstd's seekable format), so that a read at any offset
// starts at the frame holding it and a compressed read sends stored frames
// as they are.
//
// It owns the byte format (SeekTable, FrameCompressor) and the memory of
// zstd encoders and decoders (Pool). It knows nothing of gRPC, of digests
// or of any store: it must not import another package of this module.
package zstdseek
