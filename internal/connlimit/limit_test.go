package connlimit

import (
	"errors"
	"io"
	"net"
	"testing"
)

// dialAccept dials l and returns the connection Accept gives for it.
func dialAccept(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	return dialFromAccept(t, l, net.IPv4(127, 0, 0, 1))
}

func TestConnLimitKeepsTCPReadFromAndCountsSlots(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Limit(inner, 2).(*connLimit)
	defer l.Close()
	a, b := dialAccept(t, l), dialAccept(t, l)
	// What net/http looks for to send a file with sendfile.
	if _, ok := a.(io.ReaderFrom); !ok {
		t.Fatalf("an accepted TCP connection is a %T, without ReadFrom", a)
	}
	if n := len(l.slots); n != 2 {
		t.Fatalf("%d slots taken by 2 open connections", n)
	}
	a.Close()
	a.Close() // a second Close gives nothing back twice
	if n := len(l.slots); n != 1 {
		t.Fatalf("%d slots taken after one of 2 connections was closed twice, want 1", n)
	}
	c := dialAccept(t, l)
	if n := len(l.slots); n != 2 {
		t.Fatalf("%d slots taken by 2 open connections", n)
	}
	// Full: an Accept waits, and Close wakes it.
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	l.Close()
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept waiting for a slot, after Close: %v, want net.ErrClosed", err)
	}
	b.Close()
	c.Close()
	if n := len(l.slots); n != 0 {
		t.Fatalf("%d slots taken after every connection closed", n)
	}
}
