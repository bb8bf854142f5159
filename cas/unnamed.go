package cas

import "context"

// UnnamedWriterStorage is a Storage that can also store a blob whose hash
// its writer does not know until the last byte: the HTTP cache's keyed
// entries (sccache's, Gradle's) arrive named by a key the client chose,
// not by their content's hash. Such a blob is hashed once, as it is
// written, where a plain Storage needs it hashed once to name it and again
// as NewWriter checks it. A protocol uses it where a Storage offers it
// (a type assertion), and NewWriter otherwise.
type UnnamedWriterStorage interface {
	Storage
	// NewUnnamedWriter starts writing a blob of size bytes whose hash the
	// caller does not know, size >= 1 (the empty blob is always present); arrived is as for NewWriter. The writer's
	// Digest has an empty Hash until Commit succeeds, which stores the
	// blob under the SHA-256 of what was written; Digest then returns it.
	// Commit fails with ErrMismatch only if fewer than size bytes were
	// written (writing more fails as for NewWriter). Storing a blob that
	// is already present succeeds. The caller must Commit or Abort.
	NewUnnamedWriter(ctx context.Context, size int64, arrived Encoding) (BlobWriter, error)
}
