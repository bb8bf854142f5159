// Package membuf provides pooled, reference-counted byte buffers for Go
// services that move bulk bytes, so that the bytes they move stop costing
// garbage-collector time.
//
// A [Pool] hands out byte slices from size classes spaced between powers of
// two, keeps returned slices across garbage collections under a byte budget,
// and counts what it does. Its method set, Get(int) *[]byte and Put(*[]byte),
// is grpc-go's mem.BufferPool, so a *Pool can be installed in grpc-go without
// this package importing grpc.
//
// A [Buffer] is a reference-counted view of pooled (or plain) memory: the
// memory goes back to its pool when the last view is freed. A [Slice] is a
// scatter-gather list of buffers with readers and writers.
//
// Debug mode (the MEMBUF_DEBUG environment variable, or [Config].Debug)
// records where buffers are taken and freed and reports leaks, double frees
// and writes after free; see [Report].
package membuf
