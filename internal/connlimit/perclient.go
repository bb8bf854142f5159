package connlimit

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// PerClient is a listener that serves at most max connections from
// one client address at once (and, through Admit, from one identity): a connection past it is closed as soon as
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
// (Limit), a connection it closes gives its slot back at once.
type PerClient struct {
	net.Listener
	max int
	log *slog.Logger

	mu         sync.Mutex
	open       map[string]int         // connections open per client address
	conns      map[string]*servedConn // the open ones by remote address (Admit)
	byIdentity map[string]int         // connections counted per authenticated identity
}

// servedConn is an open connection as PerClient served it, and the
// identity it counts for once a request showed one (Admit).
type servedConn struct {
	net.Conn
	identity string // "": none yet
	refused  error  // not nil: its identity was past the limit, the answer to every request on it
}

// LimitPerClient returns l serving at most n connections at once from
// one client address, a *PerClient (n < 1: l, no limit), logging those it
// refuses to log.
func LimitPerClient(l net.Listener, n int, log *slog.Logger) net.Listener {
	if n < 1 {
		return l
	}
	return &PerClient{Listener: l, max: n, log: log, open: make(map[string]int), conns: make(map[string]*servedConn), byIdentity: make(map[string]int)}
}

// Accept returns the next connection whose address has fewer than max
// open, closing those that come from an address that has max.
func (l *PerClient) Accept() (net.Conn, error) {
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
func (l *PerClient) closed(client, remote string) {
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

// RefusedGrace is how long a connection refused for its identity stays
// open: for its request's answer to reach the client.
const RefusedGrace = time.Second

// Refused is Admit's refusal: the identity holds as many connections as
// one client may.
type Refused struct {
	Identity string // as the request's answer shows it
	Open     int
}

func (r *Refused) Error() string {
	return fmt.Sprintf("%s has %d connections open, the most one client may (--max-connections-per-client): use fewer", r.Identity, r.Open)
}

// Admit counts the connection from remote for the identity identify finds
// in its request (name "": none, held by its address alone), if it counts
// for none yet; or, if that identity holds its limit already, refuses the
// request, and every later one on the connection, with a *Refused and
// closes the connection RefusedGrace later, giving its slots back. A
// connection it did not serve (not TCP) is admitted.
func (cl *PerClient) Admit(remote string, identify func() (name, shown string)) error {
	cl.mu.Lock()
	sc := cl.conns[remote]
	if sc == nil || sc.identity != "" || sc.refused != nil {
		cl.mu.Unlock()
		if sc == nil {
			return nil // not a TCP connection: no address, no count
		}
		return sc.refused
	}
	cl.mu.Unlock()
	// Outside the lock: a password's first check takes a bcrypt.
	name, shown := identify()
	if name == "" {
		return nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if sc.identity != "" || sc.refused != nil || cl.conns[remote] != sc {
		return sc.refused // another request on it got here first, or it closed
	}
	if n := cl.byIdentity[name]; n >= cl.max {
		cl.log.Warn("connection refused: its identity has as many open as --max-connections-per-client allows", "identity", name, "open", n, "peer", remote)
		sc.refused = &Refused{Identity: shown, Open: n}
		conn := sc.Conn
		time.AfterFunc(RefusedGrace, func() { conn.Close() })
		return sc.refused
	}
	cl.byIdentity[name]++
	sc.identity = name
	return nil
}
