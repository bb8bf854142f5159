package httpcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/internal/lograte"
)

// DefaultMaxActionResultSize bounds a PUT to /ac/ where Options set no
// bound: an ActionResult is a few hundred bytes, but ccache keeps whole
// compiled objects under /ac/ in its own format (RawActionCache).
const DefaultMaxActionResultSize = 64 << 20

// UploadBudget is the budget PUT bodies are taken under: reapi.Server's
// (AcquireUpload, ReleaseUpload), so that ByteStream writes and PUTs share
// one bound on the upload data in memory. It is shared per client: the
// request's context carries its client (access.WithClient).
type UploadBudget interface {
	// AcquireUpload waits until n bytes fit and takes them, or returns
	// ctx's error; it returns how much it took.
	AcquireUpload(ctx context.Context, n int64) (int64, error)
	// ReleaseUpload gives back what AcquireUpload took under the same
	// request's context.
	ReleaseUpload(ctx context.Context, n int64)
}

// Options configure a Handler.
type Options struct {
	// MaxBlobSize is the largest blob or action result the store accepts
	// (the disk's size, a configured limit); 0 means no limit. A larger
	// PUT is refused (413) before its body is read.
	MaxBlobSize int64
	// Pool provides the buffers blobs are read into and PUT bodies are
	// received in, one chunk at a time; nil allocates them plainly.
	Pool membuf.BufferPool
	// ChunkSize is the size of those chunks; 0 means cas.DefaultChunkSize.
	ChunkSize int
	// Access authenticates requests and decides what each caller may do;
	// nil lets every client do everything.
	Access *access.Control
	// RawActionCache keeps /ac/ entries as the opaque bytes a client PUTs
	// and serves them as they are, unchecked: ccache keeps its own format
	// there. Without it, /ac/ holds ActionResult messages, checked as
	// gRPC's UpdateActionResult and GetActionResult check them. A raw
	// entry is never served to gRPC (it does not parse as an
	// ActionResult).
	RawActionCache bool
	// InstanceIsolation keeps /ac/ entries by instance (the path's prefix,
	// /{instance}/ac/{hash}) and action, as gRPC's InstanceIsolation does,
	// with the same keys (actionresult.InstanceKey). The CAS stays shared.
	InstanceIsolation bool
	// ActionResults loads the /ac/ entries a GET serves, whole or not at
	// all (not with RawActionCache); give it gRPC's. nil: a Loader of the
	// handler's own without a generation.
	ActionResults *actionresult.Loader
	// ActionCacheOf, if not nil, is an instance's (or, as "/NAMESPACE",
	// a keyed namespace's) action cache over the store (its entries' own
	// age limit, decorator.ActionResultExpiry.ForInstance); nil: the
	// store's.
	ActionCacheOf func(instance string) cas.ActionCache
	// MaxActionResultSize bounds a PUT to /ac/, which is held in memory
	// whole; 0 means DefaultMaxActionResultSize.
	MaxActionResultSize int64
	// Budget bounds the PUT data held in memory, with ByteStream's; nil: a
	// PUT holds one chunk at a time, unbounded over requests.
	Budget UploadBudget
	// StallTimeout ends a PUT, 408 and nothing stored, when the server has
	// waited this long for the next chunk of its body, as ByteStream's
	// stall timeout ends a stalled Write: a client that stops sending must
	// not hold the upload budget and a connection forever. 0 means one
	// minute (reapi.DefaultUploadStallTimeout).
	StallTimeout time.Duration
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
}

// Handler serves the HTTP cache protocol over a Storage.
type Handler struct {
	store cas.Storage
	opts  Options
	log   *slog.Logger
	stats counters
	// started is when the handler was made: the modification time a
	// PROPFIND reports of a keyed namespace's collections.
	started time.Time
	// entryLocks serialize write-once entries' writes (keyed.go).
	entryLocks entryLocks
}

// New returns a Handler over store.
func New(store cas.Storage, opts Options) (*Handler, error) {
	if store == nil {
		return nil, errors.New("httpcache: New needs a store")
	}
	if opts.ChunkSize < 0 || opts.MaxActionResultSize < 0 || opts.StallTimeout < 0 {
		return nil, fmt.Errorf("httpcache: negative option: ChunkSize %d, MaxActionResultSize %d, StallTimeout %v", opts.ChunkSize, opts.MaxActionResultSize, opts.StallTimeout)
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = time.Minute
	}
	if opts.ChunkSize == 0 {
		opts.ChunkSize = cas.DefaultChunkSize
	}
	if opts.MaxActionResultSize == 0 {
		opts.MaxActionResultSize = DefaultMaxActionResultSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ActionResults == nil {
		opts.ActionResults = actionresult.NewLoader(store, actionresult.LoaderOptions{})
	}
	// A full disk fails every PUT alike: a warning or error of one kind
	// is written at most once a second, with a count of those dropped.
	opts.Logger = slog.New(lograte.New(opts.Logger.Handler(), slog.LevelWarn))
	return &Handler{store: store, opts: opts, log: opts.Logger, started: time.Now()}, nil
}

// ServeHTTP answers one request of the cache protocol.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case isTurboPath(r.URL.Path):
		h.serveTurbo(w, r)
		return
	case isNxPath(r.URL.Path):
		h.serveNx(w, r)
		return
	}
	k, f, hash, err := parsePath(r.URL.Path)
	if gp, ok := parseGoCachePath(r.URL.Path); ok && errors.Is(err, errNotCachePath) {
		h.serveGoCache(w, r, gp)
		return
	}
	if errors.Is(err, errNotCachePath) {
		var kp keyedPath
		if kp, err = parseKeyedPath(r.URL.Path); err == nil {
			h.serveKeyed(w, r, kp)
			return
		}
	}
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errNotCachePath) {
			code = http.StatusNotFound
		}
		h.answer(w, opOther, code, err.Error())
		return
	}
	get := opGet
	if k == kindAC {
		get = opGetAC
	}
	op, ok := h.getHeadOrPut(w, r, get)
	if !ok {
		return
	}
	instance := pathInstance(r.URL.Path)
	if k == kindAC {
		r, ok = h.authorizeInstance(w, r, op, instance)
	} else {
		r, ok = h.authorize(w, r, op)
	}
	if !ok {
		return
	}
	switch op {
	case opGet, opHead:
		h.getBlob(w, r, op, f, hash)
	case opPut:
		h.putBlob(w, r, f, hash)
	case opGetAC, opHeadAC:
		h.getActionResult(w, r, op, instance, f, hash)
	case opPutAC:
		h.putActionResult(w, r, instance, f, hash)
	}
}

// authorize reports whether the caller may perform op, answering the
// access control's denial if not (access.Denial.HTTP: 401, asking for
// credentials, or 403). It comes before anything about the request is
// looked up, so a refusal says nothing of what is stored. The request it
// returns, a PUT, carries the client it counts as (access.WithClient),
// whose share of the upload budget its body takes.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, op operation) (*http.Request, bool) {
	id, denied := h.opts.Access.Authorize(access.HTTPCredentials(r), op.access())
	return h.admit(w, r, op, id, denied)
}

// authorizeInstance is authorize for op on instance's action cache: the
// access file's rule for it, if it names one (access.Control.Instances).
func (h *Handler) authorizeInstance(w http.ResponseWriter, r *http.Request, op operation, instance string) (*http.Request, bool) {
	id, denied := h.opts.Access.AuthorizeInstance(access.HTTPCredentials(r), instance, op.access())
	return h.admit(w, r, op, id, denied)
}

// authorizeNamespace is authorize for op on a keyed namespace: the
// access file's rule for it, if it names one.
func (h *Handler) authorizeNamespace(w http.ResponseWriter, r *http.Request, op operation, namespace string) (*http.Request, bool) {
	id, denied := h.opts.Access.AuthorizeNamespace(access.HTTPCredentials(r), namespace, op.access())
	return h.admit(w, r, op, id, denied)
}

// admit answers denied, if not nil, and reports whether the request may
// go on (denied is nil), returning it with its client for a PUT.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, op operation, id access.Identity, denied *access.Denial) (*http.Request, bool) {
	if denied == nil {
		if op == opPut || op == opPutAC || op == opPutKeyed || op == opPutGo {
			r = r.WithContext(access.WithClient(r.Context(), access.Client(id, r.RemoteAddr)))
		}
		return r, true
	}
	code, msg := denied.HTTP()
	if code == http.StatusUnauthorized {
		h.stats.unauthenticated.Add(1)
		if denied.Reason == access.BadCredentials {
			h.log.Info("request refused: authentication failed", "op", op.String(), "peer", r.RemoteAddr, "err", denied.Err)
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="membuf"`)
	} else {
		h.stats.permissionDenied.Add(1)
	}
	h.answer(w, op, code, msg)
	return r, false
}

// answer ends a request with code and a one-line plain-text body.
func (h *Handler) answer(w http.ResponseWriter, op operation, code int, msg string) {
	h.stats.count(op, code)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, msg)
}

// fail answers err, a store's error about what, with its status code.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, op operation, what string, err error) {
	code := statusOf(err)
	if code == http.StatusInternalServerError || code == http.StatusServiceUnavailable {
		h.log.Warn("request failed", "op", op.String(), "what", what, "err", err)
	}
	if code == http.StatusRequestTimeout || errors.As(err, new(shortBodyError)) {
		// A stalled body, or one that ended before its length (the
		// client half-closed, and still reads): answered although the
		// request's context is done (the failed read ended it), and the
		// connection closed, since the rest of the body is not coming.
		w.Header().Set("Connection", "close")
	} else if r.Context().Err() != nil {
		// The client left: nobody to answer. Abort rather than return, so
		// that the server does not send the 200 a handler that writes
		// nothing gets.
		h.stats.count(op, statusClientGone)
		panic(http.ErrAbortHandler)
	}
	h.answer(w, op, code, what+": "+err.Error())
}

// shortBodyError is a PUT body that ended before its Content-Length: the
// client's mistake, 400 (it wraps cas.ErrMismatch), whose answer is sent
// even though the end of the body ended the request's context.
type shortBodyError struct{ got, want int64 }

func (e shortBodyError) Error() string {
	return fmt.Sprintf("the body ended after %d of its %d bytes", e.got, e.want)
}

func (e shortBodyError) Unwrap() error { return cas.ErrMismatch }

// statusOf maps a store's error to an HTTP status, as reapi maps it to a
// gRPC code.
func statusOf(err error) int {
	switch {
	case errors.Is(err, cas.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, cas.ErrMismatch):
		return http.StatusBadRequest
	case errors.Is(err, cas.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, cas.ErrFull), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout // a PUT body stalled (Options.StallTimeout)
	case errors.Is(err, cas.ErrClosed), errors.Is(err, cas.ErrUnavailable),
		errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// setLength sets the headers of a body of n bytes of octets.
func setLength(w http.ResponseWriter, n int64) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
}

// getHeadOrPut returns the operation r's method asks for of a part of the
// cache whose GET is get (its HEAD and PUT follow it), or answers 405 and
// returns false for another method.
func (h *Handler) getHeadOrPut(w http.ResponseWriter, r *http.Request, get operation) (operation, bool) {
	switch r.Method {
	case http.MethodGet:
		return get, true
	case http.MethodHead:
		return get + 1, true
	case http.MethodPut:
		return get + 2, true
	}
	w.Header().Set("Allow", "GET, HEAD, PUT")
	h.answer(w, opOther, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not served here: GET, HEAD or PUT", r.Method))
	return 0, false
}

// actionCache is instance's action cache: Options.ActionCacheOf's, or the
// store's.
func (h *Handler) actionCache(instance string) cas.ActionCache {
	if h.opts.ActionCacheOf != nil {
		return h.opts.ActionCacheOf(instance)
	}
	return h.store
}

// namespaceCache is a keyed namespace's action cache, as actionCache's
// "/NAMESPACE".
func (h *Handler) namespaceCache(namespace string) cas.ActionCache {
	if h.opts.ActionCacheOf != nil {
		return h.opts.ActionCacheOf("/" + namespace)
	}
	return h.store
}
