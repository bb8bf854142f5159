package server

import (
	"log/slog"
	"net"
	"sync"

	"github.com/membuf/membuf/internal/lograte"
)

// connPerClient is a listener that serves at most max connections from
// one client address at once: a connection past it is closed as soon as
// it is accepted, and the next Accept goes on. Without it one address's
// idle connections (4,096 gRPC connections, 4,200 silent sockets, 4,096
// HTTP keep-alives, in one attack) took every slot of
// --max-connections and locked every other client out; now one address
// takes at most its share and the rest stay free for the others.
//
// It closes rather than waits: Accept takes connections in the order they
// came, and a wait for one address's slot would hold up every other's.
// Connections that are not TCP (a Unix socket's) have no address to share
// by and are not limited here. Over --max-connections' limit
// (limitConnections), a connection it closes gives its slot back at once.
type connPerClient struct {
	net.Listener
	max int
	log *slog.Logger

	mu         sync.Mutex
	open       map[string]int         // connections open per client address
	conns      map[string]*servedConn // the open ones by remote address (connidentity.go)
	byIdentity map[string]int         // connections counted per authenticated identity
}

// servedConn is an open connection as connPerClient served it, and the
// identity it counts for once an RPC showed one (connidentity.go).
type servedConn struct {
	net.Conn
	identity string // "": none yet
	refused  error  // not nil: its identity was past the limit, the answer to every RPC on it
}

// limitConnectionsPerClient returns l serving at most n connections at
// once from one client address (n < 1: no limit), logging those it
// refuses to log.
func limitConnectionsPerClient(l net.Listener, n int, log *slog.Logger) net.Listener {
	if n < 1 {
		return l
	}
	return &connPerClient{Listener: l, max: n, log: log, open: make(map[string]int), conns: make(map[string]*servedConn), byIdentity: make(map[string]int)}
}

// Accept returns the next connection whose address has fewer than max
// open, closing those that come from an address that has max.
func (l *connPerClient) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tcp, ok := c.RemoteAddr().(*net.TCPAddr)
		if !ok {
			return c, nil
		}
		client := tcp.IP.String()
		l.mu.Lock()
		n := l.open[client]
		if n >= l.max {
			l.mu.Unlock()
			c.Close()
			l.log.Warn("connection refused: its address has as many open as --max-connections-per-client allows", "client", client, "open", n)
			continue
		}
		l.open[client] = n + 1
		remote := tcp.String()
		release := sync.OnceFunc(func() { l.closed(client, remote) })
		// One wrapper, whatever is under it, so that every method of
		// *net.TCPConn (ReadFrom: sendfile) stays the connection's.
		var served net.Conn
		switch v := c.(type) {
		case *tcpConnInSlot: // it holds a slot of --max-connections too
			slot := v.release
			// This address's count first, then the slot: the slot wakes
			// the Accept waiting for it, whose next connection, from this
			// address, must not find the count not yet taken down (it
			// was closed as one too many).
			served = &tcpConnInSlot{TCPConn: v.TCPConn, release: func() { release(); slot() }}
		case *net.TCPConn:
			served = &tcpConnInSlot{TCPConn: v, release: release}
		default:
			served = &connInSlot{Conn: c, release: release}
		}
		l.conns[remote] = &servedConn{Conn: served}
		l.mu.Unlock()
		return served, nil
	}
}

// closed counts a connection of client, from remote, closed, for its
// address and for the identity it counted for.
func (l *connPerClient) closed(client, remote string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sc := l.conns[remote]; sc != nil && sc.identity != "" {
		if l.byIdentity[sc.identity]--; l.byIdentity[sc.identity] <= 0 {
			delete(l.byIdentity, sc.identity)
		}
	}
	delete(l.conns, remote)
	if l.open[client]--; l.open[client] <= 0 {
		delete(l.open, client)
	}
}

// limitPerClient puts gRPC's and the HTTP cache's listeners under
// --max-connections-per-client (0: three quarters of --max-connections,
// so that one address leaves the others at least a quarter), over
// --max-connections' limit, refusals logged at most once a second.
func (s *Server) limitPerClient() {
	n := s.cfg.Listen.MaxConnectionsPerClient
	if n == 0 {
		n = s.cfg.Listen.MaxConnections - s.cfg.Listen.MaxConnections/4
	}
	log := slog.New(lograte.New(s.log.Handler(), slog.LevelWarn))
	s.identityConns = &identityConns{access: s.cfg.Access}
	s.lis.grpc = limitConnectionsPerClient(s.lis.grpc, n, log)
	s.identityConns.grpc, _ = s.lis.grpc.(*connPerClient)
	if s.lis.cache != nil {
		s.lis.cache = limitConnectionsPerClient(s.lis.cache, n, log)
		s.identityConns.cache, _ = s.lis.cache.(*connPerClient)
	}
}
