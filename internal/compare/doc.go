// Package compare holds benchmarks that run membuf side by side with other
// pools and buffer libraries (grpc-go's mem package, bytedance's mcache, a
// bare sync.Pool). It has no API: it exists so that third-party code stays
// out of the core package and its tests.
//
// Run it with, for example:
//
//	go test ./internal/compare -run '^$' -bench . -benchmem -count 6
package compare
