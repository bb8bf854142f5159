package blobclient

import (
	"context"
	"net"
	"strings"
	"testing"
)

// The blobs workload refuses to dial anything but loopback, whatever the
// address it was given resolved to; nothing is sent to the refused ones.
func TestDialLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"10.0.0.1:80", "192.0.2.1:8980", "[2001:db8::1]:8980", "example.invalid:80"} {
		if c, err := DialLoopback(context.Background(), addr); err == nil {
			c.Close()
			t.Errorf("DialLoopback(%q) connected; want a refusal", addr)
		} else if !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("DialLoopback(%q): %v; want a refusal naming loopback", addr, err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := DialLoopback(context.Background(), lis.Addr().String())
	if err != nil {
		t.Fatalf("DialLoopback(%s): %v", lis.Addr(), err)
	}
	c.Close()
}
