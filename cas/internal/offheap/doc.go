// Package offheap gives the pointer-free tables of the cache (the disk's
// pack index, the bucket's pack table) their slots outside the Go heap
// where the platform allows: memory the garbage collector neither scans
// nor counts towards its goal, so that a table of millions of records
// does not double the heap it may grow to. It imports nothing of the
// cache.
package offheap
