package objstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/membuf/membuf/cas/backend/internal/objstore"
)

const timeout = time.Second

// network is a RoundTripper standing in for a connection: it reads the
// request's body, each Read followed by take (the network taking the
// bytes), and answers a body that yields one chunk per send on chunks,
// ending when the request's context ends, as a real transport's does.
type network struct {
	take   time.Duration
	chunks chan string
}

func (n *network) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		buf := make([]byte, 4)
		for {
			_, err := req.Body.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			select {
			case <-time.After(n.take):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Body: &chunkBody{ctx: req.Context(), chunks: n.chunks}}, nil
}

type chunkBody struct {
	ctx    context.Context
	chunks chan string
}

func (b *chunkBody) Read(p []byte) (int, error) {
	select {
	case c, ok := <-b.chunks:
		if !ok {
			return 0, io.EOF
		}
		return copy(p, c), nil
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

func (b *chunkBody) Close() error { return nil }

// slowSource is a request body whose every Read takes a while (the tier
// reading its disk): not the network stalling.
type slowSource struct {
	r     io.Reader
	delay time.Duration
}

func (s *slowSource) Read(p []byte) (int, error) {
	time.Sleep(s.delay)
	return s.r.Read(p)
}

func roundTrip(t *testing.T, n *network, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(t.Context(), "PUT", "http://store.invalid/x", body)
	if err != nil {
		t.Fatal(err)
	}
	return objstore.StallGuard(n, timeout).RoundTrip(req)
}

func TestStallGuardResponseStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &network{chunks: make(chan string, 1)}
		n.chunks <- "first"
		res, err := roundTrip(t, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		buf := make([]byte, 16)
		if _, err := res.Body.Read(buf); err != nil {
			t.Fatalf("first read: %v", err)
		}
		start := time.Now()
		_, err = res.Body.Read(buf) // nothing more arrives
		if err == nil || !errors.Is(err, objstore.ErrStalled) {
			t.Fatalf("read of a body that stopped: %v, want ErrStalled", err)
		}
		if waited := time.Since(start); waited != timeout {
			t.Fatalf("the stalled read gave up after %v, want %v", waited, timeout)
		}
	})
}

func TestStallGuardSlowReaderIsNoStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &network{chunks: make(chan string, 2)}
		n.chunks <- "one"
		n.chunks <- "two"
		close(n.chunks)
		res, err := roundTrip(t, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		time.Sleep(10 * timeout) // the caller busy elsewhere before reading
		got, err := io.ReadAll(&slowSource{r: res.Body, delay: 10 * timeout})
		if err != nil || string(got) != "onetwo" {
			t.Fatalf("a body read slowly: %q, %v", got, err)
		}
	})
}

func TestStallGuardRequestStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &network{take: 2 * timeout, chunks: make(chan string)}
		_, err := roundTrip(t, n, strings.NewReader("some bytes to send"))
		if !errors.Is(err, objstore.ErrStalled) {
			t.Fatalf("a request body the network does not take: %v, want ErrStalled", err)
		}
	})
}

func TestStallGuardSlowSourceIsNoStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &network{take: timeout / 2, chunks: make(chan string)}
		close(n.chunks)
		res, err := roundTrip(t, n, &slowSource{r: strings.NewReader("some bytes to send"), delay: 10 * timeout})
		if err != nil {
			t.Fatalf("a request body whose source is slow: %v", err)
		}
		res.Body.Close()
	})
}
