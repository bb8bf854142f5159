// Package bench is `membuf bench`: workloads that compare configurations
// side by side on the user's own machine, in interleaved rounds, and print
// a table with ratios against the first. The membuf command registers it
// (Command); it is a module of its own beside the server's, so that the
// command that serves and the one that measures are apart.
//
// Its packages, by concern:
//
//   - report: what a run measured (a Report of Results) and how it is
//     shown: tables, JSON, SVG charts, latency histograms;
//   - measure: running operations in interleaved rounds and measuring
//     them, and observing a server process (CPU, peak RSS, GC) that
//     measure.StartServe started or that was given by its pid;
//   - blobclient: the ByteStream client and the blobs it sends, which every
//     blob workload shares;
//   - the workloads: echo (bench grpc), blobs (bench blobs and the ceiling
//     server), buildmix (bench build) and fill (bench fill).
//
// Imports run one way: this package imports the workloads; the workloads
// import blobclient, measure and report, never each other; measure imports
// report; report and blobclient import neither (layering_test.go fails on
// an import against that grain). They are this repository's, not an API:
// nothing outside the membuf command should import them.
package bench
