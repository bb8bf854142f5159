package httpupstream_test

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/httpcache"
)

// upstreamServer is membuf's HTTP cache (httpcache.Handler over a disk
// store) on a loopback port, that a test can stop and start again on the
// same port over the same directory (an outage).
type upstreamServer struct {
	t    *testing.T
	dir  string
	addr string
	cfg  serverConfig

	srv   *http.Server
	store *disk.Store
	done  chan struct{}
}

type serverConfig struct {
	tls    *tls.Config
	access *access.Control
	// rawAC keeps /ac/ entries as opaque bytes (--http-ac-raw), as the
	// backend suite's action results are.
	rawAC bool
}

func startUpstream(t *testing.T, cfg serverConfig) *upstreamServer {
	t.Helper()
	u := &upstreamServer{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", cfg: cfg}
	u.start()
	t.Cleanup(u.stop)
	return u
}

// url is the upstream's URL with scheme and path.
func (u *upstreamServer) url(scheme, path string) string { return scheme + "://" + u.addr + path }

// start serves on u.addr (the same port again after stop).
func (u *upstreamServer) start() {
	t := u.t
	t.Helper()
	store, err := disk.OpenStore(u.dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpcache.New(store, httpcache.Options{Access: u.cfg.access, RawActionCache: u.cfg.rawAC})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", u.addr)
	if err != nil {
		t.Fatal(err)
	}
	u.addr = lis.Addr().String()
	if u.cfg.tls != nil {
		lis = tls.NewListener(lis, u.cfg.tls)
	}
	// The misconfigured cases fail handshakes on purpose: not news.
	u.srv = &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	u.store, u.done = store, make(chan struct{})
	go func() {
		defer close(u.done)
		u.srv.Serve(lis)
	}()
}

// stop closes the server and its connections, and the store; stop again
// does nothing.
func (u *upstreamServer) stop() {
	if u.srv == nil {
		return
	}
	u.srv.Close()
	<-u.done
	if err := u.store.Close(); err != nil {
		u.t.Errorf("closing the upstream's store: %v", err)
	}
	u.srv = nil
}
