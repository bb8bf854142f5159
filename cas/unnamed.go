package cas

// UnnamedWriter writes a blob whose hash its writer does not know until the
// last byte (Storage.NewUnnamedWriter): the HTTP cache's keyed entries
// (sccache's, Gradle's) arrive named by a key the client chose, not by
// their content's hash. It hashes the blob once, as it is written, where
// a writer that must be given the name needs it hashed once to name it
// and again as it checks it.
//
// Its Digest has an empty Hash until Commit succeeds, which stores the
// blob under the SHA-256 of what was written; Digest then returns it.
// Commit fails with ErrMismatch only if fewer than the size given bytes
// were written (writing more fails as for any BlobWriter). Storing a blob
// that is already present succeeds.
type UnnamedWriter interface {
	BlobWriter
	// Named returns the digest Commit will store the blob under: the
	// SHA-256 of what was written, once all of its bytes are; before
	// that, an error wrapping ErrMismatch. It lets a tier in front of
	// another record the name (the tier journals it) before committing.
	Named() (Digest, error)
}
