package httpcache

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
	"google.golang.org/protobuf/proto"
)

// getActionResult answers GET and HEAD of /ac/{hash}: the stored
// ActionResult if the Loader serves it (its outputs, and its output
// directories' files, all in the CAS), or, with RawActionCache, the stored
// bytes as they are.
func (h *Handler) getActionResult(w http.ResponseWriter, r *http.Request, op operation, instance string, f cas.Function, hash string) {
	d := h.acKey(instance, f, hash)
	var data []byte
	var err error
	if h.opts.RawActionCache {
		data, err = h.actionCache(instance).GetActionResult(r.Context(), d, cas.ClientLookup)
	} else {
		_, data, err = h.opts.ActionResults.LoadFrom(r.Context(), h.actionCache(instance), d)
		if u, ok := errors.AsType[*actionresult.Unservable](err); ok {
			h.log.Warn("stored action result not served", "action", hash, "reason", u.Reason, "err", u.Cause)
		}
		if inc, ok := errors.AsType[*actionresult.Incomplete](err); ok {
			h.log.Info("action result incomplete: a miss", "action", hash, "output", inc.Output, "missing", inc.Missing.String())
		}
	}
	if err != nil {
		h.fail(w, r, op, "action result "+hash, err)
		return
	}
	setLength(w, int64(len(data)))
	w.WriteHeader(http.StatusOK)
	h.stats.count(op, http.StatusOK)
	if op == opGetAC {
		n, _ := w.Write(data)
		h.stats.bytesOut.Add(int64(n))
	}
}

// receiveWhole reads r's body, n bytes, into fresh memory (not pooled: a
// tiered store may keep it for its upload), under the upload budget, each
// read given the stall timeout to arrive. A body that ends early is a
// shortBodyError. release gives the budget back once the data is stored;
// call it whatever the error.
func (h *Handler) receiveWhole(w http.ResponseWriter, r *http.Request, n int64) (data []byte, release func(), err error) {
	release = func() {}
	if b := h.opts.Budget; b != nil {
		took, err := b.AcquireUpload(r.Context(), n)
		if err != nil {
			return nil, release, err
		}
		release = func() { b.ReleaseUpload(r.Context(), took) }
	}
	data = make([]byte, n)
	rc := http.NewResponseController(w)
	got, err := readStalling(r.Body, data, rc, h.opts.StallTimeout)
	h.stats.bytesIn.Add(int64(got))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = shortBodyError{int64(got), n}
		}
		return nil, release, err
	}
	clearStallDeadline(rc)
	return data, release, nil
}

// readStalling fills p from body, giving each read stall to arrive.
func readStalling(body io.Reader, p []byte, rc *http.ResponseController, stall time.Duration) (int, error) {
	got := 0
	for got < len(p) {
		setStallDeadline(rc, stall)
		n, err := body.Read(p[got:])
		got += n
		if err != nil {
			if err == io.EOF && got == len(p) {
				break
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return got, err
		}
	}
	return got, nil
}

// putActionResult answers PUT of /ac/{hash}: the body, held whole under the
// upload budget, is stored as an ActionResult that actionresult.Check
// accepts (serialized again deterministically), or with RawActionCache as
// it is.
func (h *Handler) putActionResult(w http.ResponseWriter, r *http.Request, instance string, f cas.Function, hash string) {
	n := r.ContentLength
	if n < 0 {
		h.answer(w, opPutAC, http.StatusLengthRequired, "a PUT to /ac/ needs a Content-Length")
		return
	}
	limit := h.opts.MaxActionResultSize
	if max := h.opts.MaxBlobSize; max > 0 {
		limit = min(limit, max)
	}
	if n > limit {
		h.answer(w, opPutAC, http.StatusRequestEntityTooLarge, fmt.Sprintf("action result %s is %d bytes; this server takes at most %d", hash, n, limit))
		return
	}
	data, release, err := h.receiveWhole(w, r, n)
	defer release()
	if err != nil {
		h.fail(w, r, opPutAC, "action result "+hash, err)
		return
	}
	if !h.opts.RawActionCache {
		ar := &repb.ActionResult{}
		if err := proto.Unmarshal(data, ar); err != nil {
			// Logged, each time: a client that keeps its own format under
			// /ac/ (ccache) counts the 400 as a remote error and says no
			// more, so the server's log is where its operator learns why.
			h.log.Warn("refused an /ac/ PUT: the body is not an ActionResult message; clients that keep their own format there (ccache) need --http-ac-raw",
				"hash", hash, "peer", r.RemoteAddr, "user_agent", r.UserAgent(), "err", err)
			h.answer(w, opPutAC, http.StatusBadRequest, fmt.Sprintf("action result %s: the body is not an ActionResult message (%v); this server keeps opaque /ac/ entries only with --http-ac-raw", hash, err))
			return
		}
		if err := actionresult.Check(ar, f); err != nil {
			h.log.Warn("refused an /ac/ PUT: the ActionResult fails its checks", "hash", hash, "peer", r.RemoteAddr, "user_agent", r.UserAgent(), "err", err)
			h.answer(w, opPutAC, http.StatusBadRequest, fmt.Sprintf("action result %s: %v", hash, err))
			return
		}
		if data, err = actionresult.Marshal(ar); err != nil {
			h.answer(w, opPutAC, http.StatusBadRequest, fmt.Sprintf("action result %s does not serialize: %v", hash, err))
			return
		}
	}
	if err := h.actionCache(instance).PutActionResult(r.Context(), h.acKey(instance, f, hash), data); err != nil {
		h.fail(w, r, opPutAC, "action result "+hash, err)
		return
	}
	h.answer(w, opPutAC, http.StatusOK, "stored")
}

// acKey is what the action result of the action hash is kept under: its
// hash alone (an action result's name), or with InstanceIsolation,
// instance's key for it, gRPC's.
func (h *Handler) acKey(instance string, f cas.Function, hash string) cas.Digest {
	d := cas.Digest{Hash: hash, Function: f}
	if h.opts.InstanceIsolation {
		return actionresult.InstanceKey(instance, d)
	}
	return d
}
