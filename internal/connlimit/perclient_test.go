package connlimit

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// dialFromAccept dials l from local address ip and returns the connection
// Accept gives for it.
func dialFromAccept(t *testing.T, l net.Listener, ip net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
	client, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConnPerClientRefusesPastItsLimitAndGivesSlotsBack: over
// --max-connections' listener, an address past its limit has its next
// connection closed at once, without holding a slot of either limit; the
// connections served keep ReadFrom (sendfile), and closing one (twice)
// gives one slot back to both limits.
func TestConnPerClientRefusesPastItsLimitAndGivesSlotsBack(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	global := Limit(inner, 10).(*connLimit)
	l := LimitPerClient(global, 2, slog.New(slog.DiscardHandler)).(*PerClient)
	defer l.Close()
	one, two := net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)
	a, b := dialFromAccept(t, l, one), dialFromAccept(t, l, one)
	if _, ok := a.(io.ReaderFrom); !ok {
		t.Fatalf("an accepted TCP connection is a %T, without ReadFrom", a)
	}

	// A third from the same address is closed by the server; the next
	// Accept returns the other address's connection.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: one}}
	refused, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	c := dialFromAccept(t, l, two)
	if got := c.RemoteAddr().(*net.TCPAddr).IP; !got.Equal(two) {
		t.Fatalf("Accept after a refusal returned a connection from %v, want %v", got, two)
	}
	refused.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := refused.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection past its address's limit was not closed")
	}
	if n := len(global.slots); n != 3 {
		t.Fatalf("%d of --max-connections' slots taken by 3 open connections (and one refused)", n)
	}

	a.Close()
	a.Close()
	if n, open := len(global.slots), l.open["127.0.0.1"]; n != 2 || open != 1 {
		t.Fatalf("after one of 127.0.0.1's closed twice: %d global slots, %d of its own; want 2, 1", n, open)
	}
	again := dialFromAccept(t, l, one) // its slot is free again
	for _, x := range []net.Conn{b, c, again} {
		x.Close()
	}
	if n := len(global.slots); n != 0 || len(l.open) != 0 {
		t.Fatalf("after every connection closed: %d global slots, %v per address", n, l.open)
	}
}

// TestAConnectionClosedAtTheSharedLimitLeavesASlotForTheNext: an address
// at both limits at once (--max-connections 1, and its own share 1)
// closes its connection while its next one waits for the slot: the next
// is served, never closed as one too many. The close once gave the slot
// back before the address's count, and an Accept woken by the slot could
// find the count still full (TestServeConnectionLimits failed so, now
// and then).
func TestAConnectionClosedAtTheSharedLimitLeavesASlotForTheNext(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitPerClient(Limit(inner, 1), 1, slog.New(slog.DiscardHandler))
	defer l.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	prev := <-func() chan net.Conn {
		client, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		return accepted
	}()
	for i := range 300 {
		client, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		prev.Close() // wakes the Accept waiting for the slot
		var next net.Conn
		select {
		case next = <-accepted:
		case <-time.After(10 * time.Second):
			// The listener closed it as one too many, and waits for another.
			t.Fatalf("round %d: the connection after one closed was not accepted", i)
		}
		if next == nil {
			t.Fatalf("round %d: the listener closed", i)
		}
		// Served, not closed by the listener: a write from the server
		// reaches the client.
		if _, err := next.Write([]byte{1}); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := client.Read(make([]byte, 1)); err != nil {
			t.Fatalf("round %d: the connection after one closed was not served: %v", i, err)
		}
		client.Close()
		prev = next
	}
	prev.Close()
}
