package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
)

// UnixPrefix begins a listen address that is a Unix domain socket's path
// (unix:///run/membuf/grpc.sock), for --listen, --http and --http-cache: a
// cache beside a build on the same host (Bazel's --remote_proxy=unix:PATH),
// reached without TCP and by no other machine.
const UnixPrefix = "unix://"

// SocketMode is the mode of every socket file the server creates: its
// owner and group may connect (connecting needs write permission on the
// file), no one else; the directory's permissions apply as well.
const SocketMode fs.FileMode = 0o660

// SocketPath returns the path of addr if it is a Unix socket address
// (UnixPrefix and a path).
func SocketPath(addr string) (string, bool) {
	return strings.CutPrefix(addr, UnixPrefix)
}

// listen binds addr: a TCP host:port, or a Unix socket (UnixPrefix).
func listen(addr string) (net.Listener, error) {
	if path, ok := SocketPath(addr); ok {
		return listenUnix(path)
	}
	return net.Listen("tcp", addr)
}

// listenUnix binds a Unix socket at path with SocketMode. A socket file
// already there is a stale one, left by a server that crashed, if nothing
// accepts connections on it: it is removed. One that accepts is a live
// server's, and so is refused, as a TCP port in use is; so is a file at
// path that is not a socket (never removed). The listener removes the
// file when it closes.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it or choose another path", path)
		}
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w: a running server accepts connections on it", path, syscall.EADDRINUSE)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%s: an existing socket file that neither accepts nor refuses connections: %w", path, err)
		}
		// Nothing listens: a crashed server's. Removing it and binding are
		// two steps; a server starting at the same moment loses the bind.
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// Chmod rather than umask: the process's umask is the caller's, and
	// changing it would race with every other file the process creates.
	if err := os.Chmod(path, SocketMode); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// listenAddr is how the listen line and the log name l's address: host:port,
// or UnixPrefix and the path.
func listenAddr(l net.Listener) string {
	if a := l.Addr(); a.Network() == "unix" {
		return UnixPrefix + a.String()
	}
	return l.Addr().String()
}
