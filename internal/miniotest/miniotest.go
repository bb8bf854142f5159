// Package miniotest runs a real MinIO server for the tests of the S3 tier
// (cas/backend/s3's end-to-end tests, interop/'s two-node suite): on loopback,
// on free ports, with a temporary data directory, stopped when the test
// ends. It uses only the standard library, so that interop/ can import it.
//
// The binary is .ci/install-minio's: $MEMBUF_MINIO if set, else the cache
// directory that script installs into. Only that script installs it (CI
// runs it before the tests, once): a test never builds MinIO, since
// several test binaries that each did would build it at once, for minutes,
// within go test's timeout. A test that finds no binary fails with the
// command that installs it; only -short skips these tests.
package miniotest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/serveprocess"
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

// Binary returns the MinIO binary's path. If there is none, it fails the
// test, naming the command that installs it; under -short it skips it.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := find(os.Getenv("MEMBUF_MINIO"), toolsDir())
	if err == nil {
		return path
	}
	if testing.Short() {
		t.Skipf("-short: %v", err)
	}
	t.Fatal(err)
	return ""
}

// find returns the binary at explicit (MEMBUF_MINIO) if that is set, else
// the one .ci/install-minio puts under tools, or an error that says how to
// install it.
func find(explicit, tools string) (string, error) {
	if explicit != "" {
		if err := isExecutable(explicit); err != nil {
			return "", fmt.Errorf("MEMBUF_MINIO=%s: %v; unset it, or point it at a minio binary (%s installs one)", explicit, err, InstallCommand)
		}
		return explicit, nil
	}
	path := filepath.Join(tools, "minio-7aac2a2c", "minio")
	if err := isExecutable(path); err != nil {
		return "", fmt.Errorf("MinIO is not installed (%v): run %s once from the repository's root (go install github.com/minio/minio@%s into %s, about 3 minutes), or set MEMBUF_MINIO to a minio binary", err, InstallCommand, Version, filepath.Dir(path))
	}
	return path, nil
}

// isExecutable reports why path is not an executable file, if it is not.
func isExecutable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errors.New("not a regular file")
	case fi.Mode().Perm()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}

// toolsDir is .ci/install-minio's cache directory.
func toolsDir() string {
	if d := os.Getenv("MEMBUF_TOOLS"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "membuf-tools")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "membuf-tools")
}

// Server is a running MinIO.
type Server struct {
	// Endpoint is its S3 API's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// DataDir holds its data; Bucket is a directory in it.
	DataDir string

	bin, addr, console string
	cmd                *exec.Cmd
	log                serveprocess.LockedBuffer
	exited             chan struct{}
}

// Start starts MinIO with a bucket named Bucket and stops it when the test
// ends. It fails the test, with MinIO's log, if MinIO does not become
// ready within ReadyTimeout.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	var errs []error
	for range 3 { // a free port can be taken between choosing and binding it
		s, err := start(bin, t.TempDir())
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		errs = append(errs, err)
	}
	t.Fatalf("starting MinIO: %v", errors.Join(errs...))
	return nil
}

func start(bin, dataDir string) (*Server, error) {
	// A directory at the top of the data directory is a bucket to MinIO.
	if err := os.Mkdir(filepath.Join(dataDir, Bucket), 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	s := &Server{Endpoint: "http://" + addr, DataDir: dataDir, bin: bin, addr: addr, console: "127.0.0.1:" + strconv.Itoa(ports[1])}
	return s, s.launch()
}

// Stop stops MinIO and waits for it to exit, as an outage of the bucket
// would; Restart brings it back.
func (s *Server) Stop() { s.stop() }

// Restart starts a stopped server again, on its address and its data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.launch(); err != nil {
		t.Fatalf("restarting MinIO: %v", err)
	}
}

// launch starts the MinIO process of s and waits until it is ready.
func (s *Server) launch() error {
	s.exited = make(chan struct{})
	s.cmd = exec.Command(s.bin, "server", s.DataDir, "--address", s.addr,
		"--console-address", s.console, "--quiet")
	s.cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	client := &http.Client{Timeout: time.Second}
	// /minio/health/ready answers 200 a moment before the S3 API does
	// (503 XMinioServerNotInitialized until then): wait for both.
	ready := func() bool {
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
	exited := func() bool {
		select {
		case <-s.exited:
			return true
		default:
			return false
		}
	}
	if !await.Within(ReadyTimeout, func() bool { return exited() || ready() }) {
		s.stop()
		return fmt.Errorf("minio not ready within %v:\n%s", ReadyTimeout, s.log.String())
	}
	if exited() {
		return fmt.Errorf("minio exited before it was ready:\n%s", s.log.String())
	}
	return nil
}

// stop stops MinIO (SIGTERM, then SIGKILL if it lingers) and waits for it.
func (s *Server) stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Log returns what MinIO has written so far.
func (s *Server) Log() string { return s.log.String() }

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

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
