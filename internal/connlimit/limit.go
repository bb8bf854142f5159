// Package connlimit bounds a listener's connections: how many are open at
// once (Limit), and how many one client holds, by address and by the
// identity its requests authenticate as (LimitPerClient, PerClient.Admit),
// so that one client's idle connections cannot lock the others out.
// Standard library only; it knows no protocol: the server maps a refusal
// to its own answer.
package connlimit

import (
	"net"
	"sync"
)

// connLimit is a listener that serves at most cap(slots) connections at
// once: Accept waits for a free slot before it accepts, so that clients past
// the limit wait in the listen backlog instead of failing. It is
// x/net/netutil's LimitListener, except that a TCP connection stays an
// *net.TCPConn underneath (tcpConnInSlot embeds it): net/http finds its
// ReadFrom, which sends an HTTP GET's file with sendfile, where netutil's
// wrapper hides it behind a net.Conn and every byte is read into the
// process and written out again.
type connLimit struct {
	net.Listener
	slots chan struct{}
	done  chan struct{} // closed by Close: a waiting Accept gives up
	once  sync.Once
}

// Limit returns l serving at most n connections at once: Accept
// waits while n are open, so that the descriptors connections hold stay
// bounded and clients past it wait instead of failing.
func Limit(l net.Listener, n int) net.Listener {
	return &connLimit{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

// Accept waits for a free slot, then accepts a connection that gives the
// slot back when it is closed.
func (l *connLimit) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	release := sync.OnceFunc(func() { <-l.slots })
	if tc, ok := c.(*net.TCPConn); ok {
		return &tcpConnInSlot{TCPConn: tc, release: release}, nil
	}
	return &connInSlot{Conn: c, release: release}, nil
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// tcpConnInSlot is an accepted TCP connection holding a slot: every method
// of *net.TCPConn (ReadFrom, SyscallConn, SetKeepAlive...) is its own.
type tcpConnInSlot struct {
	*net.TCPConn
	release func()
}

// Close closes the connection and gives its slot back, once however often
// it is called.
func (c *tcpConnInSlot) Close() error {
	err := c.TCPConn.Close()
	c.release()
	return err
}

// connInSlot is tcpConnInSlot for any other connection.
type connInSlot struct {
	net.Conn
	release func()
}

func (c *connInSlot) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
