// Package azuritetest runs Azurite's blob service, the Azure Blob Storage
// emulator, for the tests of an Azure backend: on loopback, on a free
// port, with a temporary data directory, stopped when the test ends, and
// stopped and restarted mid-test for outage tests. It uses only the
// standard library, so that interop/ can import it.
//
// The command is .ci/install-azurite's (npm azurite@Version, run as
// node_modules/.bin/azurite-blob): $MEMBUF_AZURITE if set, else the tools
// directory that script installs into. Only that script installs it
// (.ci/test runs it before the tests): a test that finds none fails with
// the command that installs it; only -short skips these tests.
package azuritetest

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

// Version is the npm azurite version .ci/install-azurite installs.
const Version = "3.37.0"

// InstallCommand is what installs the command Binary looks for.
const InstallCommand = ".ci/install-azurite"

// Account and AccountKey are Azurite's well-known development account,
// which every Server serves (and the only one).
const (
	Account    = "devstoreaccount1"
	AccountKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// ReadyTimeout bounds the wait for a started Azurite to answer; it starts
// in about a second on an idle 2-core machine.
const ReadyTimeout = 60 * time.Second

// tool is Azurite's blob service as .ci/install-azurite installs it.
var tool = emulatortest.Tool{
	Name:    "Azurite",
	EnvVar:  "MEMBUF_AZURITE",
	Path:    filepath.Join("azurite-"+Version, "node_modules", ".bin", "azurite-blob"),
	Install: InstallCommand,
	How:     "npm install azurite@" + Version + ", about a minute; needs node and npm",
}

// Binary returns the path of Azurite's azurite-blob command. If there is
// none, it fails the test, naming the command that installs it; under
// -short it skips it.
func Binary(t testing.TB) string {
	t.Helper()
	return tool.Binary(t)
}

// Server is a running Azurite blob service.
type Server struct {
	// Endpoint is the account's blob service URL,
	// http://127.0.0.1:PORT/devstoreaccount1 (path-style, as Azurite
	// serves it).
	Endpoint string
	// DataDir holds its data.
	DataDir string

	// Process is the running emulator: Stop stops it and waits for it to
	// exit, as an outage of the service would; Restart(t) starts it again
	// on its address and its data; Log is what it has written.
	*emulatortest.Process
}

// Start starts Azurite's blob service and stops it when the test ends. It
// fails the test, with Azurite's log, if Azurite does not answer within
// ReadyTimeout. It starts with no container: a test creates its own with
// the account's key (ConnectionString).
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	return emulatortest.Start(t, "Azurite", func(dir string) (*Server, *emulatortest.Process, error) { return start(bin, dir) })
}

func start(bin, dataDir string) (*Server, *emulatortest.Process, error) {
	ports, err := emulatortest.FreePorts(1)
	if err != nil {
		return nil, nil, err
	}
	port := strconv.Itoa(ports[0])
	s := &Server{Endpoint: "http://127.0.0.1:" + port + "/" + Account, DataDir: dataDir}
	command := func() *exec.Cmd {
		// --skipApiVersionCheck: an SDK newer than the emulator still
		// works; --disableTelemetry: nothing leaves the machine.
		cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", port, "--location", dataDir,
			"--silent", "--skipApiVersionCheck", "--disableTelemetry")
		cmd.Dir = dataDir // its debug log and lock files, if any
		cmd.Env = os.Environ()
		return cmd
	}
	s.Process, err = emulatortest.Launch("Azurite", command, s.ready, ReadyTimeout)
	return s, s.Process, err
}

// ready reports whether the blob service answers: any HTTP response to an
// unsigned request (403, for want of a signature) means it is listening.
func (s *Server) ready() bool {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(s.Endpoint + "?comp=list")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.Header.Get("Server") != ""
}

// ConnectionString is the Azure SDKs' connection string for the account
// at s's endpoint.
func (s *Server) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + Account + ";AccountKey=" + AccountKey + ";BlobEndpoint=" + s.Endpoint + ";"
}
