package gocacheprog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxGets bounds the gets answered at once: go asks for as many as it
// runs actions, and each may hold a remote stream and a file.
const maxGets = 64

// Serve speaks go's GOCACHEPROG protocol on in and out over c until go
// sends close or in ends, then closes c. Gets are answered concurrently,
// puts in order (their bodies follow them on in). A request that does not
// parse ends it with an error: go and the program no longer agree on the
// stream.
func Serve(ctx context.Context, in io.Reader, out io.Writer, c *Cache) (err error) {
	rr := NewRequestReader(in)
	rw := NewResponseWriter(out)
	var writeMu sync.Mutex
	var writeErr error
	respond := func(res *Response) {
		writeMu.Lock()
		defer writeMu.Unlock()
		if writeErr == nil {
			writeErr = rw.Write(res)
		}
	}
	var gets sync.WaitGroup
	sem := make(chan struct{}, maxGets)
	closed := false
	defer func() {
		gets.Wait()
		if !closed {
			err = errors.Join(err, c.Close())
		}
		if err == nil {
			err = writeErr
		}
	}()
	respond(&Response{KnownCommands: []Command{CommandGet, CommandPut, CommandClose}})
	for {
		req, err := rr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch req.Command {
		case CommandGet:
			sem <- struct{}{}
			gets.Go(func() {
				defer func() { <-sem }()
				// Answered once the output is in place; the entry
				// naming it is written after.
				c.get(ctx, req.ActionID, func(e Entry, ok bool) { respond(getResponse(req.ID, e, ok)) })
			})
		case CommandPut:
			res, err := put(c, rr, req)
			if err != nil && errors.Is(err, errBadRequest) {
				return err
			}
			respond(res)
		case CommandClose:
			gets.Wait()
			closed = true
			res := &Response{ID: req.ID}
			if err := c.Close(); err != nil {
				res.Err = err.Error()
			}
			respond(res)
			return nil
		}
	}
}

func getResponse(id int64, e Entry, ok bool) *Response {
	if !ok {
		return &Response{ID: id, Miss: true}
	}
	t := e.Time
	return &Response{ID: id, OutputID: e.OutputID[:], Size: e.Size, Time: &t, DiskPath: e.DiskPath}
}

// put keeps a put's body; an error the response carries is the
// directory's (go then builds without caching that output), one that
// wraps errBadRequest is the stream's.
func put(c *Cache, rr *RequestReader, req Request) (*Response, error) {
	var streamErr error
	e, err := c.Put(req.ActionID, req.OutputID, req.BodySize, func(w io.Writer) (int64, error) {
		n, err := rr.Body(w)
		if errors.Is(err, errBadRequest) {
			streamErr = err
		}
		return n, err
	})
	if streamErr != nil {
		return nil, streamErr
	}
	if err != nil {
		// The body may be left unread (a directory that failed before
		// reading it): read it past, or the stream is lost.
		if _, berr := rr.Body(io.Discard); berr != nil {
			return nil, berr
		}
		return &Response{ID: req.ID, Err: fmt.Sprintf("put %s: %v", req.ActionID, err)}, nil
	}
	return &Response{ID: req.ID, DiskPath: e.DiskPath}, nil
}
