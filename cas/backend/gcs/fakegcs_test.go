package gcs_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/membuf/membuf/internal/await"
)

// fakeGCSVersion is the fake-gcs-server the tests run; the project's
// install script puts it where fakeGCSBinary looks.
const fakeGCSVersion = "v1.56.1"

// fakeGCS is a fake-gcs-server on loopback, keeping its objects in a
// directory of the test's, so that it can be stopped and started again
// over the same data and port (an outage). It is a minimal harness, meant
// to be replaced by the shared one (internal/fakegcstest).
type fakeGCS struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	// exited yields the process's exit once it has ended.
	exited chan error
}

// fakeGCSBinary finds fake-gcs-server: $MEMBUF_FAKEGCS, else where the
// install script puts it.
func fakeGCSBinary(t *testing.T) string {
	if p := os.Getenv("MEMBUF_FAKEGCS"); p != "" {
		return p
	}
	tools := os.Getenv("MEMBUF_TOOLS")
	if tools == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("fake-gcs-server: no cache directory to find it in: %v", err)
		}
		tools = filepath.Join(cache, "membuf-tools")
	}
	p := filepath.Join(tools, "fake-gcs-server-"+fakeGCSVersion, "fake-gcs-server")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fake-gcs-server %s is missing (%v): the README's test command installs it (GOBIN=%s go install github.com/fsouza/fake-gcs-server@%s), or set MEMBUF_FAKEGCS", fakeGCSVersion, err, filepath.Dir(p), fakeGCSVersion)
	}
	return p
}

// startFakeGCS starts a fake-gcs-server with the given buckets, stopped
// when the test ends.
func startFakeGCS(t *testing.T, buckets ...string) *fakeGCS {
	t.Helper()
	f := &fakeGCS{t: t, bin: fakeGCSBinary(t), dir: t.TempDir(), port: freePort(t)}
	f.start()
	t.Cleanup(f.stop)
	for _, b := range buckets {
		f.createBucket(b)
	}
	return f
}

// endpoint is the URL the backend's endpoint= parameter takes.
func (f *fakeGCS) endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(f.port) }

func (f *fakeGCS) start() {
	f.t.Helper()
	f.cmd = exec.Command(f.bin,
		"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(f.port),
		"-public-host", "127.0.0.1:"+strconv.Itoa(f.port), "-external-url", f.endpoint(),
		"-backend", "filesystem", "-filesystem-root", filepath.Join(f.dir, "root"),
		"-log-level", "error")
	var out bytes.Buffer
	f.cmd.Stdout, f.cmd.Stderr = &out, &out
	if err := f.cmd.Start(); err != nil {
		f.t.Fatalf("starting fake-gcs-server: %v", err)
	}
	f.exited = make(chan error, 1)
	go func(cmd *exec.Cmd) { f.exited <- cmd.Wait() }(f.cmd)
	await.True(f.t, "fake-gcs-server to answer", func() bool {
		select {
		case err := <-f.exited:
			f.t.Fatalf("fake-gcs-server exited: %v\n%s", err, out.String())
		default:
		}
		res, err := http.Get(f.endpoint() + "/storage/v1/b")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
}

func (f *fakeGCS) stop() {
	if f.cmd == nil {
		return
	}
	f.cmd.Process.Kill()
	<-f.exited
	f.cmd = nil
}

func (f *fakeGCS) createBucket(name string) {
	f.t.Helper()
	res, err := http.Post(f.endpoint()+"/storage/v1/b?project=membuf", "application/json", bytes.NewReader(fmt.Appendf(nil, `{"name":%q}`, name)))
	if err != nil {
		f.t.Fatalf("creating bucket %s: %v", name, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		f.t.Fatalf("creating bucket %s: %s", name, res.Status)
	}
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
