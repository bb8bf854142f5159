// Package upload is the machinery of ByteStream uploads that the handlers
// in reapi drive: the server-wide upload [Budget] (which the Remote Asset
// downloads and, through reapi.Server, the HTTP cache's PUTs share), the
// [Registry] of interrupted uploads kept for resumption, the [Receiver]
// that takes a Write stream's requests under the budget and its stall
// timer, and the [ZstdSource] a compressed upload is decoded from.
//
// It holds no protocol rule (resource names, offsets, status codes: those
// are reapi's) and imports cas, zstdseek and grpcmem only.
package upload
