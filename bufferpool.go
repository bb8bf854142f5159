package membuf

// BufferPool is the method set shared by [Pool] and grpc-go's mem.BufferPool:
// anything that hands out byte slices and takes them back.
//
// Get returns a pointer to a slice of length length; the caller owns it until
// it passes the same pointer to Put. After Put the caller must not touch the
// slice or the pointer again. The pointer is handed around rather than the
// slice so that Put does not allocate: boxing a slice header into an
// interface or a free list would.
type BufferPool interface {
	Get(length int) *[]byte
	Put(*[]byte)
}
