module github.com/membuf/membuf/cmd/membuf

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/bazelbuild/remote-apis v0.0.0-20260908115904-76ddd98e1f92
	github.com/klauspost/compress v1.20.3
	github.com/membuf/membuf v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/bench v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/cas v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/cas/backend/azure v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/cas/backend/gcs v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/cas/backend/s3 v0.0.0-00010101000000-000000000000
	github.com/membuf/membuf/grpcmem v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.72.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp v1.47.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	go.opentelemetry.io/proto/otlp v1.11.0
	golang.org/x/crypto v0.58.0
	golang.org/x/net v0.61.0
	google.golang.org/genproto/googleapis/bytestream v0.0.0-20261005182115-fad411399dd8
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	cloud.google.com/go/compute/metadata v0.10.0 // indirect
	cloud.google.com/go/longrunning v1.2.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coreos/go-oidc/v3 v3.21.0 // indirect
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/go-jose/go-jose/v4 v4.1.9 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.30.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/zeebo/blake3 v0.2.4 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20260928230214-8a89bd6388cc // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
)

// The sibling modules of this repository, built from this checkout: each
// module builds alone (GOWORK=off) and go mod tidy works in each. The
// placeholder versions above are never fetched while these replaces hold.
replace (
	github.com/membuf/membuf => ../..
	github.com/membuf/membuf/bench => ../../bench
	github.com/membuf/membuf/cas => ../../cas
	github.com/membuf/membuf/cas/backend/azure => ../../cas/backend/azure
	github.com/membuf/membuf/cas/backend/gcs => ../../cas/backend/gcs
	github.com/membuf/membuf/cas/backend/s3 => ../../cas/backend/s3
	github.com/membuf/membuf/grpcmem => ../../grpcmem
)
