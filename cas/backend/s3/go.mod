module github.com/membuf/membuf/cas/backend/s3

go 1.26.0

require (
	github.com/bazelbuild/remote-apis v0.0.0-20260908115904-76ddd98e1f92
	github.com/klauspost/compress v1.20.3
	github.com/membuf/membuf v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/cas v0.0.0-00010101000000-000000000000
	google.golang.org/genproto/googleapis/bytestream v0.0.0-20261005182115-fad411399dd8
	google.golang.org/grpc v1.85.0
)

require (
	cloud.google.com/go/longrunning v0.8.0 // indirect
	github.com/coreos/go-oidc/v3 v3.21.0 // indirect
	github.com/go-jose/go-jose/v4 v4.1.9 // indirect
	github.com/klauspost/cpuid/v2 v2.0.12 // indirect
	github.com/membuf/membuf/grpcmem v0.0.0-00010101000000-000000000000 // indirect
	github.com/zeebo/blake3 v0.2.4 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The sibling modules of this repository, built from this checkout (see
// DEVELOPERS.md): the placeholder versions above are never fetched.
replace (
	github.com/membuf/membuf => ../../..
	github.com/membuf/membuf/cas => ../..
	github.com/membuf/membuf/grpcmem => ../../../grpcmem
)
