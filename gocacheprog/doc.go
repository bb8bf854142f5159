// Package gocacheprog is a GOCACHEPROG program for the go command: go
// starts it once per invocation and keeps its build cache through it
// (cmd/go/internal/cacheprog in Go's source: JSON requests on stdin, one
// per line, and responses on stdout, in any order).
//
// The program keeps every output go is handed in a local directory ([Dir]:
// bounded in size, trimmed least recently used first, shared by the go
// commands running at once on the machine) and shares them through a
// remote cache ([Remote]): a REAPI cache over gRPC ([NewREAPIRemote]: the
// action result keyed by go's action ID names the output, a CAS blob
// named by go's output ID, which is the SHA-256 of its bytes), or an HTTP
// server speaking gocached's protocol ([NewHTTPRemote]: GET
// /action/{actionID}, PUT /{actionID}/{outputID}).
//
// What it promises go ([Cache]):
//   - a get that misses locally asks the remote and streams the output
//     into the directory; only an output whose bytes hash to its output ID
//     and whose size is the one announced is ever handed to go;
//   - a put is written to the directory and answered before anything goes
//     to the remote; it is uploaded in the background from a bounded queue,
//     and close waits for the queue at most Options.UploadWait;
//   - the remote never fails go's build: an error, a timeout or a lie is a
//     miss, logged once, after which the remote is left alone for the rest
//     of the invocation;
//   - Options.ReadOnly: gets only, for machines whose results are not to be
//     trusted (a pull request's CI).
//
// It is a module of its own, so that the program go starts on every
// invocation links only what it uses: grpc and the REAPI messages, not the
// server.
package gocacheprog
