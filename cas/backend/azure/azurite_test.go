package azure_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/membuf/membuf/internal/await"
)

// azuriteVersion is the Azurite the tests run; the project's install
// script puts it where azuriteBinary looks.
const azuriteVersion = "3.37.0"

// Azurite's well-known development account (its documentation's, public).
const (
	devAccount = "devstoreaccount1"
	devKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// azurite is Azurite's blob service on loopback, keeping its data in a
// directory of the test's, so that it can be stopped and started again
// over the same data and port (an outage). It is a minimal harness, meant
// to be replaced by a shared one.
type azurite struct {
	t    *testing.T
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	// exited yields the process's exit once it has ended.
	exited chan error
}

// azuriteBinary finds azurite-blob: $MEMBUF_AZURITE, else where the
// install script puts it.
func azuriteBinary(t *testing.T) string {
	if p := os.Getenv("MEMBUF_AZURITE"); p != "" {
		return p
	}
	tools := os.Getenv("MEMBUF_TOOLS")
	if tools == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("azurite: no cache directory to find it in: %v", err)
		}
		tools = filepath.Join(cache, "membuf-tools")
	}
	dir := filepath.Join(tools, "azurite-"+azuriteVersion)
	p := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("Azurite %s is missing (%v): the README's test command installs it (npm install --prefix %s azurite@%s), or set MEMBUF_AZURITE to its azurite-blob", azuriteVersion, err, dir, azuriteVersion)
	}
	return p
}

// startAzurite starts Azurite's blob service with the given containers,
// stopped when the test ends.
func startAzurite(t *testing.T, containers ...string) *azurite {
	t.Helper()
	a := &azurite{t: t, bin: azuriteBinary(t), dir: t.TempDir(), port: freePort(t)}
	a.start()
	t.Cleanup(a.stop)
	for _, c := range containers {
		a.createContainer(c)
	}
	return a
}

// endpoint is the URL the backend's endpoint= parameter takes.
func (a *azurite) endpoint() string {
	return "http://127.0.0.1:" + strconv.Itoa(a.port) + "/" + devAccount
}

func (a *azurite) start() {
	a.t.Helper()
	a.cmd = exec.Command(a.bin,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(a.port),
		"--location", a.dir, "--skipApiVersionCheck", "--loose", "--silent",
		// No telemetry: nothing leaves loopback, and its flush would hold
		// the shutdown up for 10 seconds.
		"--disableTelemetry")
	var out bytes.Buffer
	a.cmd.Stdout, a.cmd.Stderr = &out, &out
	if err := a.cmd.Start(); err != nil {
		a.t.Fatalf("starting Azurite: %v", err)
	}
	a.exited = make(chan error, 1)
	go func(cmd *exec.Cmd) { a.exited <- cmd.Wait() }(a.cmd)
	await.True(a.t, "Azurite to answer", func() bool {
		select {
		case err := <-a.exited:
			a.t.Fatalf("Azurite exited: %v\n%s", err, out.String())
		default:
		}
		res, err := http.Get("http://127.0.0.1:" + strconv.Itoa(a.port) + "/")
		if err != nil {
			return false
		}
		res.Body.Close()
		return true
	})
}

func (a *azurite) stop() {
	if a.cmd == nil {
		return
	}
	// SIGTERM, not SIGKILL: Azurite keeps its metadata in memory and
	// writes it out as it closes (killed, it forgets its containers).
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		a.t.Log("Azurite did not close within 20s of SIGTERM: killed")
		a.cmd.Process.Kill()
		<-a.exited
	}
	a.cmd = nil
}

func (a *azurite) createContainer(name string) {
	a.t.Helper()
	cred, err := container.NewSharedKeyCredential(devAccount, devKey)
	if err != nil {
		a.t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(a.endpoint()+"/"+name, cred, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil {
		a.t.Fatalf("creating container %s: %v", name, err)
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
