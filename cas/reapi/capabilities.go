package reapi

import (
	"context"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	smpb "github.com/bazelbuild/remote-apis/build/bazel/semver"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/reapi/chunking"
)

// capabilitiesService implements build.bazel.remote.execution.v2.Capabilities
// for a cache-only server (no execution capabilities).
type capabilitiesService struct {
	repb.UnimplementedCapabilitiesServer
	s *Server
}

// GetCapabilities advertises what is true of this server for every instance
// name: every digest function of cas.Functions, SHA-256 first (a request
// names its own, or its hashes' lengths imply one); action cache updates allowed if this caller may make
// them on the request's instance (a client told they are not skips
// uploading results); the batch limit; the
// largest blob the store accepts (its maximum size, if any); absolute
// symlink targets allowed (action results are stored as given); zstd for
// compressed-blobs ByteStream names and in batches; blob splitting and
// splicing with FastCDC 2020; REAPI 2.0 to 2.3.
func (c *capabilitiesService) GetCapabilities(ctx context.Context, req *repb.GetCapabilitiesRequest) (*repb.ServerCapabilities, error) {
	updateAC, err := c.s.capabilities(ctx, req.InstanceName)
	if err != nil {
		return nil, err
	}
	return &repb.ServerCapabilities{
		CacheCapabilities: &repb.CacheCapabilities{
			DigestFunctions:               digestFunctions,
			ActionCacheUpdateCapabilities: &repb.ActionCacheUpdateCapabilities{UpdateEnabled: updateAC},
			MaxBatchTotalSizeBytes:        c.s.opts.MaxBatchBytes,
			MaxCasBlobSizeBytes:           c.s.opts.MaxBlobSize,
			SymlinkAbsolutePathStrategy:   repb.SymlinkAbsolutePathStrategy_ALLOWED,
			SupportedCompressors:          []repb.Compressor_Value{repb.Compressor_ZSTD},
			// BatchReadBlobs answers zstd for blobs kept compressed when a
			// request accepts it.
			SupportedBatchUpdateCompressors: []repb.Compressor_Value{repb.Compressor_ZSTD},
			// Blob splitting and splicing (package chunking), with the FastCDC
			// 2020 parameters the server cuts with.
			SplitBlobSupport:   true,
			SpliceBlobSupport:  true,
			FastCdc_2020Params: &repb.FastCdc2020Params{AvgChunkSizeBytes: uint64(chunking.Params.AvgSize), Seed: uint32(chunking.Params.Seed)},
		},
		LowApiVersion:  &smpb.SemVer{Major: 2, Minor: 0},
		HighApiVersion: &smpb.SemVer{Major: 2, Minor: 3},
	}, nil
}

// digestFunctions is cas.Functions as REAPI's enum names them.
var digestFunctions = func() []repb.DigestFunction_Value {
	vs := make([]repb.DigestFunction_Value, len(cas.Functions))
	for i, f := range cas.Functions {
		vs[i] = f.Proto()
	}
	return vs
}()
