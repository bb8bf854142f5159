package httpcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// keyedMethods are the methods a keyed path answers (the 405's Allow).
const keyedMethods = "GET, HEAD, PUT, PROPFIND, MKCOL, OPTIONS"

// serveKeyed answers a request for a keyed path (keyedpath.go): GET, HEAD
// and PUT of an entry, as Gradle's HTTP build cache sends them, and
// WebDAV's PROPFIND and MKCOL besides, as sccache's WebDAV storage
// (Apache OpenDAL) sends them (webdav.go).
func (h *Handler) serveKeyed(w http.ResponseWriter, r *http.Request, kp keyedPath) {
	// What a client sends, for whoever wires a new one up (--log-level
	// debug); the arguments are not built when it is off.
	if h.log.Enabled(r.Context(), slog.LevelDebug) {
		h.log.Debug("keyed request", "method", r.Method, "path", r.URL.Path, "depth", r.Header.Get("Depth"),
			"length", r.ContentLength, "type", r.Header.Get("Content-Type"), "agent", r.UserAgent(), "auth", r.Header.Get("Authorization") != "")
	}
	var op operation
	switch r.Method {
	case http.MethodGet:
		op = opGetKeyed
	case http.MethodHead:
		op = opHeadKeyed
	case http.MethodPut:
		op = opPutKeyed
	case "PROPFIND":
		op = opPropfindKeyed
	case "MKCOL":
		op = opMkcolKeyed
	case http.MethodOptions:
		h.options(w)
		return
	default:
		w.Header().Set("Allow", keyedMethods)
		h.answer(w, opOther, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not served here: %s", r.Method, keyedMethods))
		return
	}
	r, ok := h.authorizeNamespace(w, r, op, kp.namespace)
	if !ok {
		return
	}
	switch op {
	case opGetKeyed, opHeadKeyed:
		if kp.collection {
			h.answer(w, op, http.StatusNotFound, kp.String()+": a collection, whose entries are not listed; GET an entry")
			return
		}
		rec, err := h.openKeyed(r.Context(), kp)
		if err != nil {
			h.fail(w, r, op, kp.String(), err)
			return
		}
		defer rec.release()
		h.serveEntry(w, r, op, rec)
	case opPutKeyed:
		h.putKeyed(w, r, kp)
	case opPropfindKeyed:
		h.propfind(w, r, kp)
	case opMkcolKeyed:
		h.mkcol(w, r, kp)
	}
}

// lookupKeyed returns the record of the entry kp names, or an error
// wrapping cas.ErrNotFound, without its inline content (openKeyed keeps
// it). A record that does not parse (or fails its check), or names
// another entry, is a miss, logged: no client's bytes are served for
// another's key.
func (h *Handler) lookupKeyed(ctx context.Context, kp keyedPath) (keyedRecord, error) {
	return h.lookupRecord(ctx, kp, kp.recordDigest(), cas.ClientLookup, false)
}

// openKeyed is lookupKeyed keeping the record's inline content, a view of
// the pooled buffer the record was read into: the caller must release
// the record (keyedRecord.release) once it has served it.
func (h *Handler) openKeyed(ctx context.Context, kp keyedPath) (keyedRecord, error) {
	return h.lookupRecord(ctx, kp, kp.recordDigest(), cas.ClientLookup, true)
}

// lookupRecord is lookupKeyed of kp, whose record digest is rd, for
// lookup: a client's, or the server's own check; with keep, openKeyed.
// The record is read into a buffer of the handler's pool, not a fresh
// slice: a small entry's GET reads its record whole.
func (h *Handler) lookupRecord(ctx context.Context, kp keyedPath, rd cas.Digest, lookup cas.Lookup, keep bool) (keyedRecord, error) {
	buf, err := cas.ReadActionResult(ctx, h.namespaceCache(kp.namespace), rd, lookup, h.opts.Pool)
	if err != nil {
		buf.Free()
		return keyedRecord{}, err
	}
	rec, err := parseKeyedRecord(buf.Bytes())
	if err == nil && (rec.namespace != kp.namespace || rec.key != kp.key) {
		err = fmt.Errorf("the record names %q of namespace %q", rec.key, rec.namespace)
	}
	if err != nil || !keep || !rec.isInline {
		buf.Free() // the header's fields are strings of their own
		rec.inline = nil
	}
	if err != nil {
		h.log.Warn("keyed entry's record not served", "namespace", kp.namespace, "key", kp.key, "err", err)
		return keyedRecord{}, fmt.Errorf("%w (its record is damaged)", cas.ErrNotFound)
	}
	if keep && rec.isInline {
		rec.buf = buf
	}
	return rec, nil
}

// putKeyed answers PUT of a keyed entry: storeKeyed, an entry replacing
// any earlier one (sccache rewrites its .sccache_check at every start).
func (h *Handler) putKeyed(w http.ResponseWriter, r *http.Request, kp keyedPath) {
	if kp.collection {
		w.Header().Set("Allow", "PROPFIND, MKCOL, OPTIONS")
		h.answer(w, opPutKeyed, http.StatusMethodNotAllowed, kp.String()+": a collection; PUT an entry under it")
		return
	}
	if err := h.storeKeyed(w, r, kp, "", false); err != nil {
		h.failKeyed(w, r, opPutKeyed, kp.String(), err)
		return
	}
	h.answer(w, opPutKeyed, http.StatusOK, "stored")
}

var (
	// errEntryExists: an entry written once is stored already (409).
	errEntryExists = errors.New("stored already, and an entry of this namespace is never overwritten")
	// errLengthRequired: a PUT without a Content-Length (411).
	errLengthRequired = errors.New("a PUT of a keyed entry needs a Content-Length")
)

// storeKeyed stores the body of PUT r, of its Content-Length, as kp's
// entry, with attrs (keyedRecord.attrs). Content of at most
// maxInlineContent bytes goes in the entry's record (storeInline): one
// durable write. Larger content is stored as a CAS blob, received as a
// /cas/ PUT's is (pooled chunks under the upload budget, with the stall
// timeout) and hashed as it is written, then the entry's record, naming
// it. The content goes first: a record never names content that was not
// stored. With writeOnce, an entry stored already (its record and its
// content) is errEntryExists, checked under the entry's lock before the
// record is written (putRecord), and for content too large for its record
// before the body is read as well: the first writer's bytes stay. It
// answers nothing (failKeyed answers its error).
func (h *Handler) storeKeyed(w http.ResponseWriter, r *http.Request, kp keyedPath, attrs string, writeOnce bool) error {
	n := r.ContentLength
	if n < 0 {
		return errLengthRequired
	}
	if max := h.opts.MaxBlobSize; max > 0 && n > max {
		return fmt.Errorf("%w: %d bytes; this store holds entries of at most %d", cas.ErrTooLarge, n, max)
	}
	rd := kp.recordDigest()
	rec := keyedRecord{content: cas.Digest{Size: n}, modified: time.Now(), namespace: kp.namespace, key: kp.key, attrs: attrs}
	inline := rec
	inline.isInline = true
	// The record must fit the store's bound too (a tiny one is for tests).
	if max := h.opts.MaxBlobSize; n <= maxInlineContent && (max <= 0 || int64(inline.headerLen()+recordCRCLen)+n <= max) {
		return h.storeInline(w, r, kp, rd, inline, writeOnce)
	}
	if writeOnce {
		// Before the body is read: a large body is not read for nothing.
		if err := h.checkAbsent(r.Context(), kp, rd); err != nil {
			return err
		}
	}
	content, err := h.receiveKeyed(r, w, n)
	if err != nil {
		return err
	}
	rec.content, rec.modified = content, time.Now()
	return h.putRecord(r.Context(), kp, rd, rec.marshal(), writeOnce)
}

// storeInline stores the body of PUT r, n <= maxInlineContent bytes, in
// kp's record rec (rd, rec.isInline set), laid out around it (inlineRecord) in one pooled
// buffer under the upload budget: the body is read into the record's
// place for it, hashed once, and the record stored with one write. The
// body is not copied, and no blob is written, so there is no second
// commit, and nothing to leave half stored.
func (h *Handler) storeInline(w http.ResponseWriter, r *http.Request, kp keyedPath, rd cas.Digest, rec keyedRecord, writeOnce bool) error {
	ctx := r.Context()
	size := rec.headerLen() + int(rec.content.Size) + recordCRCLen
	if b := h.opts.Budget; b != nil {
		took, err := b.AcquireUpload(ctx, int64(size))
		if err != nil {
			return err
		}
		defer b.ReleaseUpload(ctx, took)
	}
	buf := membuf.AllocUncleared(h.opts.Pool, size) // filled whole before it is stored
	// PutActionResult is done with the record when it returns.
	defer buf.Free()
	ir, err := newInlineRecord(buf.Bytes(), rec)
	if err != nil {
		return err
	}
	if err := h.receiveInto(w, r, ir.Content()); err != nil {
		return err
	}
	return h.putRecord(ctx, kp, rd, ir.Seal(), writeOnce)
}

// putRecord stores data as kp's record (rd); with writeOnce, under the
// entry's lock, and only if checkAbsent finds no entry: the check is the
// store's index lookup of the record, a miss for a new entry.
func (h *Handler) putRecord(ctx context.Context, kp keyedPath, rd cas.Digest, data []byte, writeOnce bool) error {
	if writeOnce {
		defer h.entryLocks.lock(rd).Unlock()
		if err := h.checkAbsent(ctx, kp, rd); err != nil {
			return err
		}
	}
	return h.namespaceCache(kp.namespace).PutActionResult(ctx, rd, data)
}

// checkAbsent returns errEntryExists if kp's entry (record rd) is stored
// and so is its content (an entry whose content was evicted is gone: it
// may be written again), nil if not.
func (h *Handler) checkAbsent(ctx context.Context, kp keyedPath, rd cas.Digest) error {
	// The server's own lookup: not a client's hit or miss.
	rec, err := h.lookupRecord(ctx, kp, rd, cas.ServerCheck, false)
	if errors.Is(err, cas.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	stored, err := h.contentStored(ctx, rec)
	if err != nil || !stored {
		return err
	}
	return errEntryExists
}

// contentStored reports whether rec's content is stored: in rec itself,
// or as a CAS blob the store has. It is the server's own check (of an
// entry the client looked up or writes), not a client's lookup.
func (h *Handler) contentStored(ctx context.Context, rec keyedRecord) (bool, error) {
	if rec.isInline {
		return true, nil
	}
	missing, err := h.store.FindMissing(ctx, []cas.Digest{rec.content}, cas.ServerCheck)
	return len(missing) == 0, err
}

// serveEntry answers GET or HEAD of the entry whose record is rec: its
// content from the record, or the CAS blob it names (getBlob).
func (h *Handler) serveEntry(w http.ResponseWriter, r *http.Request, op operation, rec keyedRecord) {
	if !rec.isInline {
		h.getBlob(w, r, op, cas.SHA256, rec.content.Hash)
		return
	}
	h.serveRange(w, r, op, rec.content, func(w io.Writer, off, end int64) (int64, error) {
		n, err := w.Write(rec.inline[off:end])
		return int64(n), err
	})
}

// failKeyed answers storeKeyed's error: 409 and 411 for its own, the
// store's status for the rest (fail).
func (h *Handler) failKeyed(w http.ResponseWriter, r *http.Request, op operation, what string, err error) {
	switch {
	case errors.Is(err, errEntryExists):
		h.answer(w, op, http.StatusConflict, what+": "+err.Error())
	case errors.Is(err, errLengthRequired):
		h.answer(w, op, http.StatusLengthRequired, err.Error())
	default:
		h.fail(w, r, op, what, err)
	}
}

// entryLocks serialize the check and the write of write-once entries
// (storeKeyed), a lock per stripe of their record digests: two PUTs of one
// entry cannot both find it absent and both write it.
type entryLocks [64]sync.Mutex

// lock locks the stripe of the entry whose record digest is rd, and
// returns it, for the caller to unlock.
func (l *entryLocks) lock(rd cas.Digest) *sync.Mutex {
	// Its first two hex digits, as a byte: hashes spread over the stripes.
	stripe := 0
	for _, c := range []byte(rd.Hash[:2]) {
		stripe <<= 4
		if c >= 'a' {
			c -= 'a' - '9' - 1
		}
		stripe |= int(c - '0')
	}
	m := &l[stripe%len(l)]
	m.Lock()
	return m
}

// receiveKeyed stores a PUT's body of n bytes as a CAS blob and returns
// its digest, through the store's unnamed writer, which hashes it once as
// it writes it.
func (h *Handler) receiveKeyed(r *http.Request, w http.ResponseWriter, n int64) (cas.Digest, error) {
	if n == 0 {
		return cas.Digest{Hash: cas.EmptyHash}, nil // always present
	}
	ctx := r.Context()
	bw, err := h.store.NewWriter(ctx, cas.Digest{Size: n}, cas.Uncompressed)
	if err != nil {
		return cas.Digest{}, err
	}
	defer bw.Abort() // after Commit, nothing
	if err := h.receiveBody(w, r, bw, n); err != nil {
		return cas.Digest{}, err
	}
	if err := bw.Commit(ctx); err != nil {
		return cas.Digest{}, err
	}
	return bw.Digest(), nil
}
