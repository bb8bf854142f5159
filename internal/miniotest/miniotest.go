// Package miniotest runs a real MinIO server for the tests of the S3 tier
// (cas/backend/s3's end-to-end tests, interop/'s two-node suite): on loopback,
// on free ports, with a temporary data directory, stopped when the test
// ends. It uses only the standard library, so that interop/ can import it.
//
// The binary is .ci/install-minio's: $MEMBUF_MINIO if set, else the tools
// directory that script installs into. Only that script installs it
// (.ci/test runs it before the tests, once): a test never builds MinIO,
// since several test binaries that each did would build it at once, for
// minutes, within go test's timeout. A test that finds no binary fails
// with the command that installs it; only -short skips these tests.
package miniotest

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

// Version is the MinIO module version .ci/install-minio installs.
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

// Credentials of the root user every Server runs with; tests give them to
// the AWS SDK through AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
const (
	AccessKey = "membuf-test"
	SecretKey = "membuf-test-secret"
)

// Bucket is the bucket every Server starts with.
const Bucket = "membuf"

// ReadyTimeout bounds the wait for a started server to be ready
// (/minio/health/ready, and its S3 API initialised); it starts in about
// 2.5 s on an idle 2-core machine.
const ReadyTimeout = 60 * time.Second

// InstallCommand is what installs the binary Binary looks for.
const InstallCommand = ".ci/install-minio"

// tool is MinIO as .ci/install-minio installs it.
var tool = emulatortest.Tool{
	Name:    "MinIO",
	EnvVar:  "MEMBUF_MINIO",
	Path:    filepath.Join("minio-7aac2a2c", "minio"),
	Install: InstallCommand,
	How:     "go install github.com/minio/minio@" + Version + ", about 3 minutes",
}

// Binary returns the MinIO binary's path. If there is none, it fails the
// test, naming the command that installs it; under -short it skips it.
func Binary(t testing.TB) string {
	t.Helper()
	return tool.Binary(t)
}

// find returns the binary at explicit (MEMBUF_MINIO) if that is set, else
// the one .ci/install-minio puts under tools, or an error that says how to
// install it.
func find(explicit, tools string) (string, error) { return tool.Find(explicit, tools) }

// Server is a running MinIO.
type Server struct {
	// Endpoint is its S3 API's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// DataDir holds its data; Bucket is a directory in it.
	DataDir string

	// Process is the running emulator: Stop stops it and waits for it to
	// exit, as an outage of the service would; Restart(t) starts it again
	// on its address and its data; Log is what it has written.
	*emulatortest.Process
}

// Start starts MinIO with a bucket named Bucket and stops it when the test
// ends. It fails the test, with MinIO's log, if MinIO does not become
// ready within ReadyTimeout.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	return emulatortest.Start(t, "MinIO", func(dir string) (*Server, *emulatortest.Process, error) { return start(bin, dir) })
}

func start(bin, dataDir string) (*Server, *emulatortest.Process, error) {
	// A directory at the top of the data directory is a bucket to MinIO.
	if err := os.Mkdir(filepath.Join(dataDir, Bucket), 0o755); err != nil {
		return nil, nil, err
	}
	ports, err := emulatortest.FreePorts(2)
	if err != nil {
		return nil, nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	console := "127.0.0.1:" + strconv.Itoa(ports[1])
	s := &Server{Endpoint: "http://" + addr, DataDir: dataDir}
	command := func() *exec.Cmd {
		cmd := exec.Command(bin, "server", dataDir, "--address", addr, "--console-address", console, "--quiet")
		cmd.Env = append(os.Environ(),
			"MINIO_ROOT_USER="+AccessKey,
			"MINIO_ROOT_PASSWORD="+SecretKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
		)
		return cmd
	}
	s.Process, err = emulatortest.Launch("MinIO", command, s.ready, ReadyTimeout)
	return s, s.Process, err
}

// ready reports whether MinIO answers: /minio/health/ready answers 200 a
// moment before the S3 API does (503 XMinioServerNotInitialized until
// then), so both.
func (s *Server) ready() bool {
	client := &http.Client{Timeout: time.Second}
	for _, c := range []struct {
		path string
		ok   func(int) bool
	}{
		{"/minio/health/ready", func(code int) bool { return code == http.StatusOK }},
		{"/" + Bucket + "/", func(code int) bool { return code != http.StatusServiceUnavailable }},
	} {
		resp, err := client.Get(s.Endpoint + c.path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if !c.ok(resp.StatusCode) {
			return false
		}
	}
	return true
}

// URL returns the --s3 URL of the bucket, with prefix.
func (s *Server) URL(prefix string) string {
	return "s3://" + Bucket + "/" + prefix + "?endpoint=" + s.Endpoint + "&region=us-east-1"
}

// Env returns the environment a process talking to s needs: the root
// user's credentials, and no AWS configuration of the developer's.
func (s *Server) Env(tmp string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + SecretKey,
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_CONFIG_FILE=" + filepath.Join(tmp, "no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(tmp, "no-aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
	}
}
