package grpcupstream_test

import "github.com/membuf/membuf/cas/backend/internal/upstreamtest"

var (
	digestOf = upstreamtest.DigestOf
	pattern  = upstreamtest.Pattern
	upload   = upstreamtest.Upload
	read     = upstreamtest.Read
)
