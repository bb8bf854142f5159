// Package loadgen holds the workloads behind `membuf bench`, one package
// each, and what they share; it has no code of its own. By concern:
//
//   - report: what a run measured (a Report of Results) and how it is
//     shown: tables, JSON, SVG charts, latency histograms;
//   - measure: running operations in interleaved rounds and measuring
//     them, and observing a server process (CPU, peak RSS, GC) that
//     measure.StartServe started or that was given by its pid;
//   - blobclient: the ByteStream client and the blobs it sends, which every
//     blob workload shares;
//   - the workloads: echo (bench grpc), blobs (bench blobs and the ceiling
//     server), build (bench build) and fill (bench fill).
//
// Imports run one way: the workloads import blobclient, measure and
// report, never each other; measure imports report; report and blobclient
// import neither (layering_test.go fails on an import against that grain).
package loadgen
