module github.com/membuf/membuf/gocacheprog

go 1.26.0

require (
	github.com/bazelbuild/remote-apis v0.0.0-20260908115904-76ddd98e1f92
	google.golang.org/genproto/googleapis/bytestream v0.0.0-20261005182115-fad411399dd8
	google.golang.org/grpc v1.85.0
)

require (
	cloud.google.com/go/longrunning v0.8.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
