package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// idleConnections is issue 44's count: 4,096 idle connections from one
// address took every slot of the default --max-connections.
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

// TestOneAddressCannotTakeEveryConnection is issue 44's fifth attack:
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
