// Package fakegcstest runs fake-gcs-server, a Google Cloud Storage
// emulator, for the tests of a GCS backend: on loopback, on a free port,
// with a temporary data directory (its filesystem backend) holding the
// bucket Bucket, stopped when the test ends, and stopped and restarted
// mid-test for outage tests. It uses only the standard library, so that
// interop/ can import it.
//
// The binary is .ci/install-fakegcs's: $MEMBUF_FAKEGCS if set, else the
// tools directory that script installs into. Only that script installs it
// (.ci/test runs it before the tests): a test that finds none fails with
// the command that installs it; only -short skips these tests.
package fakegcstest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/emulatortest"
)

// Version is the github.com/fsouza/fake-gcs-server version
// .ci/install-fakegcs installs.
const Version = "v1.56.1"

// InstallCommand is what installs the binary Binary looks for.
const InstallCommand = ".ci/install-fakegcs"

// Bucket is the bucket every Server starts with.
const Bucket = "membuf"

// ReadyTimeout bounds the wait for a started server to answer; it starts
// in well under a second on an idle 2-core machine.
const ReadyTimeout = 60 * time.Second

// tool is fake-gcs-server as .ci/install-fakegcs installs it.
var tool = emulatortest.Tool{
	Name:    "fake-gcs-server",
	EnvVar:  "MEMBUF_FAKEGCS",
	Path:    filepath.Join("fake-gcs-server-"+Version, "fake-gcs-server"),
	Install: InstallCommand,
	How:     "go install github.com/fsouza/fake-gcs-server@" + Version + ", about 2 minutes",
}

// Binary returns the fake-gcs-server binary's path. If there is none, it
// fails the test, naming the command that installs it; under -short it
// skips it.
func Binary(t testing.TB) string {
	t.Helper()
	return tool.Binary(t)
}

// Server is a running fake-gcs-server.
type Server struct {
	// Endpoint is its base URL, http://127.0.0.1:PORT: the JSON API is
	// under /storage/v1/, uploads under /upload/storage/v1/ (a GCS
	// client's endpoint option is Endpoint+"/storage/v1/").
	Endpoint string
	// DataDir holds its data; Bucket is a directory in it.
	DataDir string

	// Process is the running emulator: Stop stops it and waits for it to
	// exit, as an outage of the service would; Restart(t) starts it again
	// on its address and its data; Log is what it has written.
	*emulatortest.Process
}

// Start starts fake-gcs-server with a bucket named Bucket and stops it
// when the test ends. It fails the test, with the server's log, if it does
// not answer within ReadyTimeout. It checks no credentials: a client
// sends none (option.WithoutAuthentication in Google's Go SDK).
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	return emulatortest.Start(t, "fake-gcs-server", func(dir string) (*Server, *emulatortest.Process, error) { return start(bin, dir) })
}

func start(bin, dataDir string) (*Server, *emulatortest.Process, error) {
	// A directory at the top of the filesystem root is a bucket to it.
	if err := os.Mkdir(filepath.Join(dataDir, Bucket), 0o755); err != nil {
		return nil, nil, err
	}
	ports, err := emulatortest.FreePorts(1)
	if err != nil {
		return nil, nil, err
	}
	port := strconv.Itoa(ports[0])
	s := &Server{Endpoint: "http://127.0.0.1:" + port, DataDir: dataDir}
	command := func() *exec.Cmd {
		// -public-host and -external-url: the URLs it hands back (resumable
		// upload sessions, media links) name this address, not
		// storage.googleapis.com.
		cmd := exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", port,
			"-backend", "filesystem", "-filesystem-root", dataDir,
			"-public-host", "127.0.0.1:"+port, "-external-url", s.Endpoint, "-log-level", "error")
		cmd.Env = os.Environ()
		return cmd
	}
	s.Process, err = emulatortest.Launch("fake-gcs-server", command, s.ready, ReadyTimeout)
	return s, s.Process, err
}

// ready reports whether the server answers for its bucket.
func (s *Server) ready() bool {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(s.Endpoint + "/storage/v1/b/" + Bucket)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
