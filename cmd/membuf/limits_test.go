package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/membuf/membuf/cmd/membuf/internal/server"
	"golang.org/x/net/http2"
)

// h2conn is a raw HTTP/2 connection to a gRPC server, for what the gRPC
// client library will not do (ping too often) or hides (the server's
// settings).
type h2conn struct {
	c  net.Conn
	fr *http2.Framer
}

// dialH2 connects to addr and sends the HTTP/2 client preface and empty
// settings.
func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	h := &h2conn{c: c, fr: http2.NewFramer(c, c)}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return h
}

// settings reads frames until the server's (non-ack) SETTINGS arrives, or
// the deadline passes.
func (h *h2conn) settings(deadline time.Time) (map[http2.SettingID]uint32, error) {
	h.c.SetReadDeadline(deadline)
	defer h.c.SetReadDeadline(time.Time{})
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			m := map[http2.SettingID]uint32{}
			sf.ForeachSetting(func(s http2.Setting) error { m[s.ID] = s.Val; return nil })
			return m, nil
		}
	}
}

// TestServeConnectionLimits checks, on the wire, the limits serve sets:
// the streams a connection may run at once (SETTINGS_MAX_CONCURRENT_STREAMS),
// keepalive enforcement (a client pinging far more often than every 10 s
// gets GOAWAY ENHANCE_YOUR_CALM "too_many_pings"), and --max-connections
// (a connection past it waits, unserved, until one closes).
func TestServeConnectionLimits(t *testing.T) {
	s := startServe(t, "--max-connections", "2")
	first := dialH2(t, s.grpcAddr)
	set, err := first.settings(time.Now().Add(30 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got := set[http2.SettingMaxConcurrentStreams]; got != server.MaxStreamsPerConnection {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d; want %d", got, server.MaxStreamsPerConnection)
	}
	second := dialH2(t, s.grpcAddr)
	if _, err := second.settings(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// A third waits: the server does not take it while two are open. (A
	// wait that cannot prove a negative, only fail to see a positive; the
	// positive below is the check.)
	third := dialH2(t, s.grpcAddr)
	if _, err := third.settings(time.Now().Add(300 * time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a third connection with --max-connections 2 was served: %v", err)
	}
	second.c.Close()
	if _, err := third.settings(time.Now().Add(30 * time.Second)); err != nil {
		t.Errorf("the third connection after the second closed: %v; want it served", err)
	}

	// Pings back to back, with no RPC open.
	for i := range 5 {
		if err := first.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // the server may have closed the connection already
		}
	}
	first.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := first.fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY after a ping flood: %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || !bytes.Contains(ga.DebugData(), []byte("too_many_pings")) {
				t.Errorf("GOAWAY %v %q; want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
			}
			break
		}
	}
}
