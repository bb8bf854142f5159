package httpcache

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

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
		rec, err := h.lookupKeyed(r.Context(), kp)
		if err != nil {
			h.fail(w, r, op, kp.String(), err)
			return
		}
		h.getBlob(w, r, op, rec.content.Hash)
	case opPutKeyed:
		h.putKeyed(w, r, kp)
	case opPropfindKeyed:
		h.propfind(w, r, kp)
	case opMkcolKeyed:
		h.mkcol(w, r, kp)
	}
}

// lookupKeyed returns the record of the entry kp names, or an error
// wrapping cas.ErrNotFound. A record that does not parse, or names
// another entry, is a miss, logged: no client's bytes are served for
// another's key.
func (h *Handler) lookupKeyed(ctx context.Context, kp keyedPath) (keyedRecord, error) {
	data, err := h.store.GetActionResult(ctx, kp.recordDigest())
	if err != nil {
		return keyedRecord{}, err
	}
	rec, err := parseKeyedRecord(data)
	if err == nil && (rec.namespace != kp.namespace || rec.key != kp.key) {
		err = fmt.Errorf("the record names %q of namespace %q", rec.key, rec.namespace)
	}
	if err != nil {
		h.log.Warn("keyed entry's record not served", "namespace", kp.namespace, "key", kp.key, "err", err)
		return keyedRecord{}, fmt.Errorf("%w (its record is damaged)", cas.ErrNotFound)
	}
	return rec, nil
}

// putKeyed answers PUT of a keyed entry: the body is stored as a CAS blob,
// received as a /cas/ PUT's is (pooled chunks under the upload budget,
// with the stall timeout) and hashed as it is written, then the entry's
// record, naming it, replaces any earlier one. The content goes first: a
// record never names content that was not stored.
func (h *Handler) putKeyed(w http.ResponseWriter, r *http.Request, kp keyedPath) {
	if kp.collection {
		w.Header().Set("Allow", "PROPFIND, MKCOL, OPTIONS")
		h.answer(w, opPutKeyed, http.StatusMethodNotAllowed, kp.String()+": a collection; PUT an entry under it")
		return
	}
	n := r.ContentLength
	if n < 0 {
		h.answer(w, opPutKeyed, http.StatusLengthRequired, "a PUT of a keyed entry needs a Content-Length")
		return
	}
	if max := h.opts.MaxBlobSize; max > 0 && n > max {
		h.answer(w, opPutKeyed, http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is %d bytes; this store holds entries of at most %d", kp, n, max))
		return
	}
	content, err := h.receiveKeyed(r, w, n)
	if err != nil {
		h.fail(w, r, opPutKeyed, kp.String(), err)
		return
	}
	rec := keyedRecord{content: content, modified: time.Now(), namespace: kp.namespace, key: kp.key}
	if err := h.store.PutActionResult(r.Context(), kp.recordDigest(), rec.marshal()); err != nil {
		h.fail(w, r, opPutKeyed, kp.String(), err)
		return
	}
	h.answer(w, opPutKeyed, http.StatusOK, "stored")
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
