package httpcache

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// getBlob answers GET and HEAD of /cas/{hash}: the blob, or the part a
// Range asks for, through the store's checked reads (WriteRange: from a
// file, sendfile).
func (h *Handler) getBlob(w http.ResponseWriter, r *http.Request, op operation, f cas.Function, hash string) {
	ctx := r.Context()
	// Named by its hash alone: the store knows its size. A HEAD is a
	// client's lookup too, marking the blob used; a tier opens lazily, so
	// it fetches nothing for one.
	b, err := h.store.Open(ctx, cas.Digest{Hash: hash, Size: -1, Function: f})
	if err != nil {
		h.fail(w, r, op, "blob "+hash, err)
		return
	}
	defer b.Close()
	h.serveRange(w, r, op, cas.Digest{Hash: hash, Size: b.Size(), Function: f}, func(w io.Writer, off, end int64) (int64, error) {
		return b.WriteRange(ctx, w, off, end, h.opts.Pool, h.opts.ChunkSize)
	})
}

// serveRange answers GET or HEAD of content d: the whole, or the part a
// Range asks for, which write writes to the body (write(w, off, end)
// writes [off, end) to w and returns how much it wrote; an error before
// the first byte is answered with its status, after it cuts the
// connection).
func (h *Handler) serveRange(w http.ResponseWriter, r *http.Request, op operation, d cas.Digest, write func(w io.Writer, off, end int64) (int64, error)) {
	ctx := r.Context()
	rng, partial, satisfiable := parseRange(r.Header.Get("Range"), d.Size)
	if partial && !satisfiable {
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(d.Size, 10))
		h.answer(w, op, http.StatusRequestedRangeNotSatisfiable, fmt.Sprintf("range %q is outside blob %s", r.Header.Get("Range"), d))
		return
	}
	if !partial {
		rng = byteRange{0, d.Size}
	}
	code := http.StatusOK
	header := func() {
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("ETag", `"`+d.Hash+`"`) // the content's own name: strong
		if partial {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", rng.off, rng.end-1, d.Size))
			code = http.StatusPartialContent
		}
		setLength(w, rng.end-rng.off)
		w.WriteHeader(code)
		h.stats.count(op, code)
	}
	if r.Method == http.MethodHead {
		header()
		return
	}
	if rng.off == rng.end {
		header()
		return
	}
	// The status line waits for the first byte: a blob found bad before
	// any of it is checked (a packed blob, a first block) is still a 404.
	body := &bodyWriter{w: w, header: header}
	sent, err := write(body, rng.off, rng.end)
	h.stats.bytesOut.Add(sent)
	switch {
	case err == nil:
	case !body.started:
		h.fail(w, r, op, "blob "+d.String(), err)
	case ctx.Err() != nil:
		h.stats.aborted.Add(1) // the client went away
	default:
		// Too late for a status: cut the connection, so the client sees a
		// body shorter than its Content-Length and no wrong byte completes.
		h.stats.aborted.Add(1)
		h.log.Warn("read failed after the response started; connection cut", "blob", d.String(), "sent", sent, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// setStallDeadline gives the next read of a request's body d to arrive.
// A connection that cannot take deadlines (httptest's recorder) reads
// without one.
func setStallDeadline(rc *http.ResponseController, d time.Duration) {
	rc.SetReadDeadline(time.Now().Add(d))
}

// clearStallDeadline lifts the body's deadline once a PUT has read all of
// it, so that the connection's next request is not held to it. After a
// stall it stays: the server then fails at once to read the rest of the
// body before it answers, and closes the connection.
func clearStallDeadline(rc *http.ResponseController) {
	rc.SetReadDeadline(time.Time{})
}

// putBlob answers PUT of /cas/{hash}: the body is written to the store as
// it arrives, in pooled chunks under the upload budget, and committed only
// if it hashes to the name.
func (h *Handler) putBlob(w http.ResponseWriter, r *http.Request, f cas.Function, hash string) {
	ctx := r.Context()
	n := r.ContentLength
	if n < 0 {
		h.answer(w, opPut, http.StatusLengthRequired, "a PUT to /cas/ needs a Content-Length: the blob's size is part of its name in the store")
		return
	}
	if max := h.opts.MaxBlobSize; max > 0 && n > max {
		h.answer(w, opPut, http.StatusRequestEntityTooLarge, fmt.Sprintf("blob %s is %d bytes; this store holds blobs of at most %d", hash, n, max))
		return
	}
	d := cas.Digest{Hash: hash, Size: n, Function: f}
	if n == 0 {
		if hash != f.EmptyHash() {
			h.answer(w, opPut, http.StatusBadRequest, fmt.Sprintf("an empty body does not hash to %s", hash))
			return
		}
		h.answer(w, opPut, http.StatusOK, "stored")
		return
	}
	if ok, err := cas.Contains(ctx, h.store, d); err == nil && ok {
		// Stored already: read the body only to keep the connection.
		got, err := io.Copy(io.Discard, r.Body)
		h.stats.bytesIn.Add(got)
		if err != nil {
			h.fail(w, r, opPut, "blob "+d.String(), err)
			return
		}
		h.answer(w, opPut, http.StatusOK, "stored")
		return
	}
	bw, err := h.store.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		h.fail(w, r, opPut, "blob "+d.String(), err)
		return
	}
	defer bw.Abort() // after Commit, nothing
	if err := h.receiveBody(w, r, bw, n); err != nil {
		h.fail(w, r, opPut, "blob "+d.String(), err)
		return
	}
	if err := bw.Commit(ctx); err != nil {
		if errors.Is(err, cas.ErrMismatch) {
			err = fmt.Errorf("%w: the body does not hash to %s", cas.ErrMismatch, hash)
		}
		h.fail(w, r, opPut, "blob "+d.String(), err)
		return
	}
	h.answer(w, opPut, http.StatusOK, "stored")
}

// receiveBody writes r's body, n bytes, to bw as it arrives, in pooled
// chunks under the upload budget, each given the stall timeout to arrive.
// A body that ends early is a shortBodyError.
func (h *Handler) receiveBody(w http.ResponseWriter, r *http.Request, bw cas.BlobWriter, n int64) error {
	chunk := int64(h.opts.ChunkSize)
	rc := http.NewResponseController(w)
	for done := int64(0); done < n; {
		want := min(chunk, n-done)
		if got, err := h.receive(r, rc, bw, want); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = shortBodyError{done + got, n}
			}
			return err
		}
		done += want
	}
	// Where the framing does not bound the body by its Content-Length
	// (HTTP/2's frames, a caller of ServeHTTP), a byte past it means the
	// client's length is wrong: nothing is stored. net/http's HTTP/1.1
	// body is at its end here, and answers at once.
	var past [1]byte
	if k, _ := r.Body.Read(past[:]); k > 0 {
		return fmt.Errorf("%w: the body is longer than its Content-Length of %d bytes", cas.ErrMismatch, n)
	}
	clearStallDeadline(rc)
	return nil
}

// receiveInto reads r's body, exactly len(p) bytes, into p, each read
// given the stall timeout to arrive: the whole of a small body, under the
// upload budget the caller took for p. A body that ends early is a
// shortBodyError, one longer than p cas.ErrMismatch.
func (h *Handler) receiveInto(w http.ResponseWriter, r *http.Request, p []byte) error {
	rc := http.NewResponseController(w)
	got, err := readStalling(r.Body, p, rc, h.opts.StallTimeout)
	h.stats.bytesIn.Add(int64(got))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return shortBodyError{int64(got), int64(len(p))}
	}
	if err != nil {
		return err
	}
	// As in receiveBody: a byte past the Content-Length stores nothing.
	var past [1]byte
	if k, _ := r.Body.Read(past[:]); k > 0 {
		return fmt.Errorf("%w: the body is longer than its Content-Length of %d bytes", cas.ErrMismatch, len(p))
	}
	clearStallDeadline(rc)
	return nil
}

// receive reads n bytes of r's body into a pooled buffer, under the upload
// budget, and writes them to bw. It returns how many bytes of the body it
// read.
func (h *Handler) receive(r *http.Request, rc *http.ResponseController, bw cas.BlobWriter, n int64) (int64, error) {
	if b := h.opts.Budget; b != nil {
		took, err := b.AcquireUpload(r.Context(), n)
		if err != nil {
			return 0, err
		}
		defer b.ReleaseUpload(r.Context(), took)
	}
	buf := membuf.AllocUncleared(h.opts.Pool, int(n)) // filled whole before it is read
	defer buf.Free()
	setStallDeadline(rc, h.opts.StallTimeout)
	got, err := io.ReadFull(r.Body, buf.Bytes())
	h.stats.bytesIn.Add(int64(got))
	if err != nil {
		return int64(got), err
	}
	_, err = bw.Write(buf.Bytes())
	return int64(got), err
}

// bodyWriter is a response's body that writes the status line and headers
// (header) before its first byte, and passes ReadFrom on to the
// ResponseWriter's, so that a blob sent from its file goes out with
// sendfile (cas.BlobReader.WriteRange).
type bodyWriter struct {
	w       http.ResponseWriter
	header  func()
	started bool
}

func (b *bodyWriter) start() {
	if !b.started {
		b.started = true
		b.header()
	}
}

func (b *bodyWriter) Write(p []byte) (int, error) {
	b.start()
	return b.w.Write(p)
}

// ReadFrom hands r to the ResponseWriter's ReadFrom (net/http's: sendfile
// to a TCP connection when r is a file); a writer without one (a test's
// recorder) is written with a copy.
func (b *bodyWriter) ReadFrom(r io.Reader) (int64, error) {
	b.start()
	if rf, ok := b.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{b.w}, r)
}
