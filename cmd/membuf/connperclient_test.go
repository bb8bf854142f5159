package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/membuf/membuf/internal/await"
)

// idleConnections: before the per-client limit, 4,096 idle connections
// from one address took every slot of the default --max-connections.
const idleConnections = 4096

// openIdle opens n TCP connections to addr from 127.0.0.1 that send
// nothing, closed when t ends. Some the server may close at once (those
// past the per-client limit): that is the point.
func openIdle(t *testing.T, addr string, n int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Timeout: 10 * time.Second}
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("opening idle connection %d of %d: %v", len(conns)+1, n, err)
		}
		conns = append(conns, c)
	}
}

// fromAddress dials from local address ip: another client to the server.
func fromAddress(ip net.IP) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	return d.DialContext
}

// TestOneAddressCannotTakeEveryConnection is the idle-connection attack:
// 4,096 silent connections from one address held every connection slot,
// of gRPC's listener and of the HTTP cache's, and every other client
// waited in the backlog. With the default limits another address is
// served at once.
func TestOneAddressCannotTakeEveryConnection(t *testing.T) {
	s := startServe(t, "--http-cache", "127.0.0.1:0")
	other := net.IPv4(127, 0, 0, 2)

	t.Run("gRPC", func(t *testing.T) {
		openIdle(t, s.grpcAddr, idleConnections)
		dialOther := fromAddress(other)
		conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialOther(ctx, "tcp", addr) }))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{}); err != nil {
			t.Fatalf("another address beside %d idle connections of one: %v", idleConnections, err)
		}
	})
	t.Run("HTTP cache", func(t *testing.T) {
		openIdle(t, s.httpCacheAddr, idleConnections)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: fromAddress(other)}}
		resp, err := client.Get(fmt.Sprintf("http://%s/cas/%s", s.httpCacheAddr, strings.Repeat("0", 64)))
		if err != nil {
			t.Fatalf("another address beside %d idle connections of one: %v", idleConnections, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET of a missing blob: %s, want 404", resp.Status)
		}
	})
}

// TestOneIdentityCannotTakeEveryConnection: an authenticated client is
// held to --max-connections-per-client connections whatever addresses it
// connects from; past it its RPC is RESOURCE_EXHAUSTED naming the limit,
// and a connection it closes makes space again. Anonymous clients and other
// identities are not held up by it.
func TestOneIdentityCannotTakeEveryConnection(t *testing.T) {
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	writeHtpasswdFile(t, htpasswd, map[string]string{"ci": "ci-pw", "dev": "dev-pw"})
	s := startServe(t, "--htpasswd", htpasswd, "--anonymous-reads", "--max-connections-per-client", "2", "--http-cache", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(ip byte) *grpc.ClientConn {
		dialer := fromAddress(net.IPv4(127, 0, 0, ip))
		conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialer(ctx, "tcp", addr) }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	call := func(conn *grpc.ClientConn, user string) error {
		c := ctx
		if user != "" {
			c = basicAuth(ctx, user, user+"-pw")
		}
		_, err := repb.NewCapabilitiesClient(conn).GetCapabilities(c, &repb.GetCapabilitiesRequest{})
		return err
	}
	first, second := connect(2), connect(3)
	for i, conn := range []*grpc.ClientConn{first, second} {
		if err := call(conn, "ci"); err != nil {
			t.Fatalf("ci's connection %d of 2: %v", i+1, err)
		}
	}
	third := connect(4)
	if err := call(third, "ci"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-connections-per-client") {
		t.Fatalf("ci's third connection, from a third address: %v; want RESOURCE_EXHAUSTED naming --max-connections-per-client", err)
	}
	await.True(t, "the refused connection to be closed by the server", func() bool { return third.GetState() != connectivity.Ready })
	if err := call(connect(4), "dev"); err != nil {
		t.Fatalf("another identity from the same address: %v", err)
	}
	if err := call(connect(5), ""); err != nil {
		t.Fatalf("an anonymous client: %v", err)
	}
	first.Close()
	await.True(t, "a connection of ci's to be served again after one closed", func() bool { return call(connect(6), "ci") == nil })

	// The HTTP cache's connections likewise, each client a keep-alive
	// connection from an address of its own.
	get := func(ip byte, user string) (int, string) {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: fromAddress(net.IPv4(127, 0, 0, ip))}}
		t.Cleanup(client.CloseIdleConnections)
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/cas/%s", s.httpCacheAddr, strings.Repeat("0", 64)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, user+"-pw")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for ip := byte(7); ip < 9; ip++ {
		if code, body := get(ip, "ci"); code != http.StatusNotFound {
			t.Fatalf("ci's HTTP connection from 127.0.0.%d: %d %s; want 404", ip, code, body)
		}
	}
	if code, body := get(9, "ci"); code != http.StatusTooManyRequests || !strings.Contains(body, "--max-connections-per-client") {
		t.Fatalf("ci's third HTTP connection: %d %s; want 429 naming --max-connections-per-client", code, body)
	}
	if code, body := get(9, "dev"); code != http.StatusNotFound {
		t.Fatalf("another identity's HTTP connection: %d %s; want 404", code, body)
	}
}
