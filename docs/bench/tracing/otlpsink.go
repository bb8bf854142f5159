//go:build ignore

// otlpsink is an OTLP/HTTP receiver that accepts every export and drops
// it: the traced server's exporter then costs what it would against a
// collector, without one.
//
//	go run docs/bench/tracing/otlpsink.go [127.0.0.1:4318]
package main

import (
	"io"
	"log"
	"net/http"
	"os"
)

func main() {
	addr := "127.0.0.1:4318"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	log.Fatal(http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST an export", http.StatusMethodNotAllowed)
			return
		}
		io.Copy(io.Discard, r.Body)
		// An empty ExportTraceServiceResponse: all accepted.
		w.Header().Set("Content-Type", "application/x-protobuf")
	})))
}
