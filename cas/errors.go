package cas

import "errors"

// Errors returned by a Storage. Compare with errors.Is.
var (
	// ErrNotFound: the blob or action result is not in the store.
	ErrNotFound = errors.New("not found")
	// ErrMismatch: uploaded content does not match its digest (size or hash).
	ErrMismatch = errors.New("content does not match digest")
	// ErrTooLarge: an entry is larger than the store's maximum size.
	ErrTooLarge = errors.New("larger than the store's maximum size")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store is closed")
	// ErrFull: uploads in progress take the whole maximum size; nothing
	// stored is left to evict for more. Retrying later may succeed.
	ErrFull = errors.New("the store's maximum size is taken by uploads in progress")
	// ErrUnavailable: a tier the store needs could not be reached, or
	// failed; trying again later may succeed.
	ErrUnavailable = errors.New("storage tier unavailable")
)
