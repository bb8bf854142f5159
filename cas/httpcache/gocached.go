package httpcache

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/actionresult"
)

// gocached's protocol: what go's GOCACHEPROG programs go-cacher (bradfitz's
// go-tool-cache) and membuf-gocache's http:// remote speak.
//
//	GET /action/{actionID}        Want-Object: 1
//	  200, Go-Output-Id: {outputID}, the output as the body; or 404
//	PUT /{actionID}/{outputID}    Content-Length: n, the output
//	  204
//
// An entry is kept as membuf-gocache's grpc:// remote keeps it, so that
// both reach the same entries: the action result of the action named by
// actionID (instance ""; the store keys action results by hash, so the
// size membuf-gocache gives it does not matter here) names one output file, goOutputPath, the
// output, a CAS blob named by its hash, the output ID. A GET serves one
// only if the Loader would serve the action result (its output is in the
// CAS); a PUT stores the output only if it hashes to the output ID, then
// the action result. Access is a keyed entry's: read-ac for GET and HEAD,
// write-ac for PUT. The paths are taken from the keyed namespaces: the
// namespace "action", and a namespace of 64 hex digits, are gocached's.

// goOutputPath is the output file an action result of go's names: the
// same as membuf-gocache's (gocacheprog.OutputPath).
const goOutputPath = "go-output"

// goCachePath is a gocached path, parsed: outputID is "" for a GET.
type goCachePath struct {
	actionID, outputID string
}

// parseGoCachePath reports whether p is a gocached path: /action/{hash}
// or /{hash}/{hash}, each hash 64 lowercase hex digits.
func parseGoCachePath(p string) (goCachePath, bool) {
	// ParseHash, not CheckHash: every keyed path is asked first, and a
	// miss makes no error.
	first, second, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if _, isHash := cas.ParseHash(second); !ok || !isHash {
		return goCachePath{}, false
	}
	if first == "action" {
		return goCachePath{actionID: second}, true
	}
	if _, isHash := cas.ParseHash(first); isHash {
		return goCachePath{actionID: first, outputID: second}, true
	}
	return goCachePath{}, false
}

// serveGoCache answers a gocached request.
func (h *Handler) serveGoCache(w http.ResponseWriter, r *http.Request, gp goCachePath) {
	var op operation
	switch {
	case gp.outputID == "" && r.Method == http.MethodGet:
		op = opGetGo
	case gp.outputID == "" && r.Method == http.MethodHead:
		op = opHeadGo
	case gp.outputID != "" && r.Method == http.MethodPut:
		op = opPutGo
	default:
		allow := "GET, HEAD"
		if gp.outputID != "" {
			allow = "PUT"
		}
		w.Header().Set("Allow", allow)
		h.answer(w, opOther, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not served here: %s", r.Method, allow))
		return
	}
	r, ok := h.authorize(w, r, op)
	if !ok {
		return
	}
	if op == opPutGo {
		h.putGoOutput(w, r, gp)
		return
	}
	if r.Header.Get("Want-Object") != "1" {
		// gocached's older two-request form (a JSON answer, then GET
		// /output/...) is not served: every client since sends this.
		h.answer(w, op, http.StatusBadRequest, "GET /action/ needs the header Want-Object: 1")
		return
	}
	out, err := h.goOutput(r, gp.actionID)
	if err != nil {
		h.fail(w, r, op, "go action "+gp.actionID, err)
		return
	}
	w.Header().Set("Go-Output-Id", out.Hash)
	h.getBlob(w, r, op, cas.SHA256, out.Hash)
}

// goOutput returns the output the action result of go's action names,
// read through the empty instance's action cache (its age limit); an
// action result that is not one of go's is a miss, logged.
func (h *Handler) goOutput(r *http.Request, actionID string) (cas.Digest, error) {
	ar, _, err := h.opts.ActionResults.LoadFrom(r.Context(), h.actionCache(""), h.acKey("", cas.SHA256, actionID))
	if err != nil {
		return cas.Digest{}, err
	}
	files := ar.GetOutputFiles()
	if len(files) != 1 || files[0].GetPath() != goOutputPath || len(ar.GetOutputDirectories()) > 0 {
		h.log.Warn("an action result under a go action ID is not a go output's: a miss", "action", actionID)
		return cas.Digest{}, fmt.Errorf("%w: the action result is not a go output's", cas.ErrNotFound)
	}
	return cas.ParseDigest(files[0].GetDigest())
}

// putGoOutput answers PUT /{actionID}/{outputID}: the body is stored as
// a /cas/ PUT's is, hashed as it arrives and kept only if it hashes to
// the output ID; then the action result naming it, through the empty
// instance's action cache, as /ac/ stores it.
func (h *Handler) putGoOutput(w http.ResponseWriter, r *http.Request, gp goCachePath) {
	ctx := r.Context()
	n := r.ContentLength
	if n < 0 {
		h.answer(w, opPutGo, http.StatusLengthRequired, "a PUT of a go output needs a Content-Length")
		return
	}
	if max := h.opts.MaxBlobSize; max > 0 && n > max {
		h.answer(w, opPutGo, http.StatusRequestEntityTooLarge, fmt.Sprintf("go output %s is %d bytes; this store holds blobs of at most %d", gp.outputID, n, max))
		return
	}
	d := cas.Digest{Hash: gp.outputID, Size: n}
	what := "go output " + gp.outputID
	if err := h.receiveGoOutput(w, r, d); err != nil {
		if errors.Is(err, cas.ErrMismatch) && !errors.As(err, new(shortBodyError)) {
			err = fmt.Errorf("%w: the body does not hash to its output ID", cas.ErrMismatch)
		}
		h.fail(w, r, opPutGo, what, err)
		return
	}
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: goOutputPath, Digest: d.Proto()}}}
	data, err := actionresult.Marshal(ar)
	if err == nil {
		err = h.actionCache("").PutActionResult(ctx, h.acKey("", cas.SHA256, gp.actionID), data)
	}
	if err != nil {
		h.fail(w, r, opPutGo, what, err)
		return
	}
	h.stats.count(opPutGo, http.StatusNoContent)
	w.WriteHeader(http.StatusNoContent) // what go-cacher expects
}

// receiveGoOutput stores the body as the blob d, unless it is stored
// already (then the body is read past, to keep the connection).
func (h *Handler) receiveGoOutput(w http.ResponseWriter, r *http.Request, d cas.Digest) error {
	ctx := r.Context()
	if d.Size == 0 {
		if d.Hash != cas.EmptyHash {
			return fmt.Errorf("%w: an empty body", cas.ErrMismatch)
		}
		return nil
	}
	if ok, err := cas.Contains(ctx, h.store, d); err == nil && ok {
		got, err := io.Copy(io.Discard, r.Body)
		h.stats.bytesIn.Add(got)
		return err
	}
	bw, err := h.store.NewWriter(ctx, d, cas.Uncompressed)
	if err != nil {
		return err
	}
	defer bw.Abort() // after Commit, nothing
	if err := h.receiveBody(w, r, bw, d.Size); err != nil {
		return err
	}
	return bw.Commit(ctx)
}
