module github.com/membuf/membuf/cas/backend/azure

go 1.26.0

// The sibling modules of this repository, built from this checkout (see
// DEVELOPERS.md): the placeholder versions are never fetched.
replace (
	github.com/membuf/membuf => ../../..
	github.com/membuf/membuf/cas => ../..
	github.com/membuf/membuf/grpcmem => ../../../grpcmem
)

require (
	github.com/membuf/membuf v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/cas v0.0.0-00010101000000-000000000000
)

require (
	cloud.google.com/go/longrunning v0.8.0 // indirect
	github.com/bazelbuild/remote-apis v0.0.0-20260908115904-76ddd98e1f92 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/zeebo/assert v1.3.0 // indirect
	github.com/zeebo/blake3 v0.2.4 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
