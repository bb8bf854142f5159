// Package fastcdc splits a stream into content-defined chunks with FastCDC
// 2020 (Xia et al., "The Design of Fast Content-Defined Chunking for Data
// Deduplication Based Storage Systems", IEEE TPDS 2020), as the REAPI
// defines it for blob splitting (remote_execution.proto, FastCdc2020Params):
// normalization level 2, the minimum a quarter and the maximum four times
// the average, the gear table of the paper's reference implementation, and
// the optional seed XORed into it. A client that chunks with the same
// parameters cuts where the server cuts, so chunks of similar blobs are
// shared: the test vectors of remote-apis' fastcdc2020_test_vectors.txt
// pass (chunker_test.go).
//
// A boundary depends only on the bytes since the previous one: after an
// edit, the chunks resynchronise within a chunk or two, and every chunk
// after that is the same as before.
package fastcdc
