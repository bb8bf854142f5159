// Package mapped maps a stored file read-only into memory, so that a read
// hands its bytes on from the page cache by reference (a membuf.Buffer
// viewing the mapping) instead of copying them into a pooled buffer first.
//
// A Region is reference counted: whoever maps it holds one reference, and
// every Buffer made from it another. The mapping is removed (munmap) when
// the last one goes, so a view handed to gRPC, which writes it to the wire
// after the read has returned, never outlives the memory it views.
//
// A mapped page that cannot be read (an I/O error of the disk, a file cut
// short under the mapping) raises SIGBUS on the access, which would kill
// the process. Touch runs code that reads a mapping with
// runtime/debug.SetPanicOnFault, so that such a fault becomes an error
// (ErrFault) in the reading goroutine: the store checks every read's bytes
// inside Touch, which is also their first access.
//
// It imports membuf, never the store.
package mapped
