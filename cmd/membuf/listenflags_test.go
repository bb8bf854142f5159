package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"golang.org/x/net/http2"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

// shortTempDir is a temporary directory with a short path: a Unix
// socket's path must fit 108 bytes, which t.TempDir's may not leave.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// unixHTTPClient is an HTTP client whose every connection goes to the
// Unix socket at path.
func unixHTTPClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
}

func sha(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// Every listener can be a Unix socket: the listen line names them as
// unix:// addresses, gRPC and both HTTP listeners answer on them, the
// files have SocketMode, a second server on the same socket is refused
// while the first runs, the files are gone after the stop, and a stale
// socket file (a crash's) is replaced at the next start.
func TestServeUnixSockets(t *testing.T) {
	dir := shortTempDir(t)
	grpcSock, httpSock, cacheSock := filepath.Join(dir, "g.sock"), filepath.Join(dir, "h.sock"), filepath.Join(dir, "c.sock")
	// A stale socket: bound, then closed without removing its file.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: grpcSock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(grpcSock); err != nil {
		t.Fatalf("the stale socket file is not there: %v", err)
	}

	s := startServe(t, "--listen", "unix://"+grpcSock, "--http", "unix://"+httpSock, "--http-cache", "unix://"+cacheSock)
	if s.grpcAddr != "unix://"+grpcSock || s.httpAddr != "unix://"+httpSock || s.httpCacheAddr != "unix://"+cacheSock {
		t.Fatalf("listen line names %q %q %q; want the three unix:// addresses", s.grpcAddr, s.httpAddr, s.httpCacheAddr)
	}
	for _, p := range []string{grpcSock, httpSock, cacheSock} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != server.SocketMode {
			t.Errorf("%s: %v, %v; want a socket with mode %v", p, fi.Mode(), err, server.SocketMode)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := []byte("over a unix socket")
	bs := bspb.NewByteStreamClient(dial(t, s.grpcAddr)) // grpc-go dials unix:// itself
	writeBlob(t, ctx, bs, fmt.Sprintf("uploads/u1/blobs/%s/%d", sha(data), len(data)), data)
	if got := readBlob(t, ctx, bs, fmt.Sprintf("blobs/%s/%d", sha(data), len(data))); !bytes.Equal(got, data) {
		t.Fatalf("read back %q; want %q", got, data)
	}
	resp, err := unixHTTPClient(cacheSock).Get("http://membuf/cas/" + sha(data))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET /cas/ over the cache's socket: %d %q", resp.StatusCode, body)
	}
	resp, err = unixHTTPClient(httpSock).Get("http://membuf/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz over the HTTP socket: %d", resp.StatusCode)
	}
	if strings.Contains(s.log(), "may write without authenticating") {
		t.Errorf("a server on Unix sockets only warned that it is open to other machines:\n%s", s.log())
	}

	code, _, errOut := runCLI(t, ctx, "serve", "--listen", "unix://"+grpcSock, "--http", "", "--dir", filepath.Join(t.TempDir(), "d"))
	if code != 1 || !strings.Contains(errOut, "--listen:") || !strings.Contains(errOut, "a running server accepts connections on it") {
		t.Errorf("a second server on a live socket: exit %d\n%s\nwant exit 1 naming --listen and the running server", code, errOut)
	}
	if _, err := os.Lstat(grpcSock); err != nil {
		t.Errorf("the refused second server removed the first one's socket: %v", err)
	}

	if code, _, errOut := s.stop(); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, errOut)
	}
	for _, p := range []string{grpcSock, httpSock, cacheSock} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the stop: %v; want it removed", p, err)
		}
	}
}

// A file at a socket's path that is not a socket is never removed: the
// start fails naming it.
func TestServeUnixSocketPathIsAFile(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "g.sock")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, _, errOut := runCLI(t, ctx, "serve", "--listen", "unix://"+path, "--http", "", "--dir", filepath.Join(t.TempDir(), "d"))
	if code != 1 || !strings.Contains(errOut, "is not a socket") {
		t.Errorf("exit %d\n%s\nwant exit 1 saying %s is not a socket", code, errOut, path)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "keep me" {
		t.Errorf("the file at the socket's path: %q, %v; want it untouched", got, err)
	}
}

// --tls-min-version 1.3 refuses a client that offers at most TLS 1.2, on
// gRPC's listener and both HTTP ones, and serves one that offers 1.3; the
// default (1.2) serves the 1.2 client.
func TestServeTLSMinVersion(t *testing.T) {
	p := newPKI(t)
	handshake := func(addr string, maxVersion uint16) error {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.ca.Pool(), ServerName: "localhost", MaxVersion: maxVersion, NextProtos: []string{"h2", "http/1.1"}})
		if err == nil {
			c.Close()
		}
		return err
	}
	tls13 := startServe(t, "--tls-cert", p.certFile, "--tls-key", p.keyFile, "--tls-min-version", "1.3", "--http-cache", "127.0.0.1:0")
	for _, addr := range []string{tls13.grpcAddr, tls13.httpAddr, tls13.httpCacheAddr} {
		if err := handshake(addr, tls.VersionTLS12); err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Errorf("%s with --tls-min-version 1.3, a TLS 1.2 client: %v; want a protocol version alert", addr, err)
		}
		if err := handshake(addr, tls.VersionTLS13); err != nil {
			t.Errorf("%s with --tls-min-version 1.3, a TLS 1.3 client: %v", addr, err)
		}
	}
	tls12 := startServe(t, "--tls-cert", p.certFile, "--tls-key", p.keyFile)
	if err := handshake(tls12.grpcAddr, tls.VersionTLS12); err != nil {
		t.Errorf("by default, a TLS 1.2 client: %v", err)
	}
	if err := handshake(tls12.grpcAddr, tls.VersionTLS11); err == nil {
		t.Errorf("by default, a TLS 1.1 client was served")
	}
}

// --idle-timeout closes a gRPC connection that runs no RPC for that long
// (GOAWAY), and an HTTP keep-alive connection that sends no request.
func TestServeIdleTimeout(t *testing.T) {
	s := startServe(t, "--idle-timeout", "1s", "--http-cache", "127.0.0.1:0")
	h := dialH2(t, s.grpcAddr)
	start := time.Now()
	h.c.SetReadDeadline(start.Add(30 * time.Second))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY on an idle gRPC connection with --idle-timeout 1s: %v", err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			break
		}
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("GOAWAY after %v; want no sooner than --idle-timeout 1s", d)
	}
	for _, addr := range []string{s.httpCacheAddr, s.httpAddr} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c.SetReadDeadline(start.Add(30 * time.Second))
		// The answer, then EOF when the idle connection is closed.
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Errorf("%s: an idle keep-alive connection was not closed: %v", addr, err)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("%s: closed after %v; want no sooner than --idle-timeout 1s", addr, d)
		}
	}
}

// --max-blob-size refuses a larger blob on every path before its data is
// read: ByteStream Write (INVALID_ARGUMENT, naming the limit), a batch
// (that blob alone), the HTTP cache's PUT (413); Capabilities advertises
// it; blobs at the limit are stored. It comes from the environment as
// every flag does.
func TestServeMaxBlobSize(t *testing.T) {
	t.Setenv("MEMBUF_MAX_BLOB_SIZE", "1KiB")
	s := startServe(t, "--http-cache", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := dial(t, s.grpcAddr)
	caps, err := repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := caps.GetCacheCapabilities().GetMaxCasBlobSizeBytes(); got != 1024 {
		t.Errorf("max_cas_blob_size_bytes = %d; want 1024", got)
	}
	big, fits := bytes.Repeat([]byte("x"), 1025), bytes.Repeat([]byte("y"), 1024)

	bs := bspb.NewByteStreamClient(conn)
	w, err := bs.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Send(&bspb.WriteRequest{ResourceName: fmt.Sprintf("uploads/u/blobs/%s/%d", sha(big), len(big)), Data: big, FinishWrite: true})
	if _, err := w.CloseAndRecv(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "1024") {
		t.Errorf("ByteStream Write of 1025 bytes: %v; want INVALID_ARGUMENT naming the limit", err)
	}
	writeBlob(t, ctx, bs, fmt.Sprintf("uploads/u/blobs/%s/%d", sha(fits), len(fits)), fits)

	other := []byte("small")
	resp, err := repb.NewContentAddressableStorageClient(conn).BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{Requests: []*repb.BatchUpdateBlobsRequest_Request{
		{Digest: &repb.Digest{Hash: sha(big), SizeBytes: int64(len(big))}, Data: big},
		{Digest: &repb.Digest{Hash: sha(other), SizeBytes: int64(len(other))}, Data: other},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetResponses(); len(got) != 2 || codes.Code(got[0].GetStatus().GetCode()) != codes.InvalidArgument || got[1].GetStatus().GetCode() != 0 {
		t.Errorf("BatchUpdateBlobs of a 1025-byte and a 5-byte blob: %v; want INVALID_ARGUMENT for the first alone", got)
	}

	code, body := httpDo(t, http.MethodPut, "http://"+s.httpCacheAddr+"/cas/"+sha(big), big)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("HTTP PUT of 1025 bytes: %d %s; want 413", code, body)
	}
	if code, body := httpDo(t, http.MethodGet, "http://"+s.httpCacheAddr+"/cas/"+sha(other), nil); code != http.StatusOK || string(body) != "small" {
		t.Errorf("GET of the batch's small blob: %d %q", code, body)
	}
	if !strings.Contains(s.log(), "max_blob_size=1KiB") {
		t.Errorf("the start-up log does not give max_blob_size=1KiB:\n%s", s.log())
	}
}

// A listener that writes (gRPC, the HTTP cache) on an address other
// machines can reach, with no authentication, is warned about, each by
// its flag; on loopback it is not.
func TestServeWarnsAboutOpenListeners(t *testing.T) {
	open := startServe(t, "--http-cache", ":0")
	if !strings.Contains(open.log(), "anyone who can reach --http-cache may write without authenticating") {
		t.Errorf("--http-cache :0 with no access control, and no warning:\n%s", open.log())
	}
	if strings.Contains(open.log(), "anyone who can reach --listen") {
		t.Errorf("gRPC on 127.0.0.1 warned about as open:\n%s", open.log())
	}
	closed := startServe(t, "--http-cache", "127.0.0.1:0")
	if strings.Contains(closed.log(), "may write without authenticating") {
		t.Errorf("a server on loopback only warned that it is open:\n%s", closed.log())
	}
}

// The new flags' mistakes are usage errors naming the flag.
func TestServeListenFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-min-version", "1.1"}, `invalid value "1.1" for flag -tls-min-version: want one of 1.2, 1.3`},
		{[]string{"--tls-min-version", "1.3"}, "--tls-min-version 1.3 needs --tls-cert"},
		{[]string{"--idle-timeout", "0s"}, "--idle-timeout must be positive"},
		{[]string{"--max-blob-size", "2G", "--max-size", "1G"}, "--max-blob-size 2GiB is more than --max-size 1GiB"},
		{[]string{"--listen", "unix://"}, `--listen "unix://": want unix:///path/to/socket`},
		{[]string{"--http-cache", "unix:///no/such/dir/c.sock"}, "the socket's directory /no/such/dir is not a directory that exists"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		args := append([]string{"serve", "--http", "", "--dir", filepath.Join(t.TempDir(), "d")}, tc.args...)
		code, _, errOut := runCLI(t, ctx, args...)
		cancel()
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("membuf %q: exit %d\n%s\nwant exit 2 saying %q", args, code, errOut, tc.want)
		}
	}
}
