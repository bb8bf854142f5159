package cas

import (
	"os"
	"os/exec"
	"testing"

	"google.golang.org/grpc"
)

// plainServerEnv, set to 1 in a test binary's environment, makes the test
// servers plain grpc.NewServer() servers instead of the ones `membuf serve`
// runs (ServerOptions: grpcmem's codec and the zero-copy ByteStream path).
const plainServerEnv = "MEMBUF_CAS_TEST_PLAIN_SERVER"

// serverOptionsForTests is how newEnv makes its gRPC server: by default as
// `membuf serve` does, so that every rule of the server is checked on the
// path users run; under plainServerEnv without them, so that the handlers'
// fallback (a server registered without ServerOptions) is held to the same
// rules.
func serverOptionsForTests(opts Options) []grpc.ServerOption {
	if os.Getenv(plainServerEnv) == "1" {
		return []grpc.ServerOption{}
	}
	return ServerOptions(opts.Pool)
}

// TestSuiteOnPlainServer runs this package's tests again, in a child
// process, on plain gRPC servers: both ByteStream paths must follow every
// rule.
func TestSuiteOnPlainServer(t *testing.T) {
	if os.Getenv(plainServerEnv) == "1" {
		t.Skip("already the plain-server run")
	}
	if testing.Short() {
		t.Skip("the plain-server run is left out under -short")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^TestSuiteOnPlainServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), plainServerEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests failed on plain gRPC servers: %v\n%s", err, out)
	}
}
