module github.com/membuf/membuf/internal/compare

go 1.26.0

require (
	github.com/bytedance/gopkg v0.1.4
	github.com/membuf/membuf v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
)

require golang.org/x/sys v0.48.0 // indirect

// The sibling modules of this repository, built from this checkout: each
// module builds alone (GOWORK=off) and go mod tidy works in each. The
// placeholder versions above are never fetched while these replaces hold.
replace github.com/membuf/membuf => ../..
