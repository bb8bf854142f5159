// Package loadgen drives side-by-side load against gRPC servers in the same
// process and reports what each configuration costs: throughput, latency
// percentiles and, from [gcstats], what the garbage collector took.
//
// Two workloads exist. [Echo] sends payloads of fixed sizes through a unary
// and a streaming echo service, with grpc-go's default buffer pool or a
// membuf.Pool installed. [Blobs] uploads blobs to a ByteStream server (an
// in-process cas server, or any server at an address) and then reads and
// writes them concurrently. `membuf bench` is their command line.
//
// Configurations are compared in rounds: every round runs each case under
// each configuration in turn, the order rotated from round to round, so that
// noise from the machine falls on all of them alike. A [Report] holds the
// totals per case and configuration, prints as a table with ratios against
// the first configuration, encodes as JSON and draws as SVG charts.
//
// Measurements cover the whole process: the client that drives the load runs
// beside the server it measures. The clients here copy as little as they
// can, but gRPC's client side is never free; see the workloads' doc
// comments, and [Report.GCScope].
package loadgen
