package blobs

// Compressed modes of the blobs workload: the same operations as ModeRead
// and ModeWrite, with REAPI's compressed-blobs/zstd resource names. A
// compressed read receives the server's zstd stream and counts it (it does
// not decompress it while measuring: the client's CPU is not the server's);
// a compressed write sends the blob compressed, as Bazel and the REAPI SDK
// do. Throughput counts the blobs' own (uncompressed) bytes, what a client
// gets. Their blobs are a set of their own, uploaded compressed, so that a
// server that keeps what arrives compressed compressed (membuf serve's
// default, bazel-remote's always) serves them from stored frames.
const (
	ModeReadZstd  = "read-zstd"
	ModeWriteZstd = "write-zstd"
)

// BlobModes are every mode of the blobs workload.
var BlobModes = []string{ModeRead, ModeWrite, ModeBatchWrite, ModeStall, ModeReadZstd, ModeWriteZstd, ModeHTTPGet, ModeHTTPPut, ModeHTTPKeyedGet, ModeHTTPKeyedPut}

// zstdMode reports whether mode uses compressed resource names.
func zstdMode(mode string) bool { return mode == ModeReadZstd || mode == ModeWriteZstd }

// readMode reports whether mode reads the set uploaded before measuring.
func readMode(mode string) bool {
	return mode == ModeRead || mode == ModeReadZstd || mode == ModeHTTPGet || mode == ModeHTTPKeyedGet
}
