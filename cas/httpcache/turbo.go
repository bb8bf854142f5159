package httpcache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/membuf/membuf/cas"
)

// Turborepo's remote cache (the API turbo speaks to TURBO_API with
// TURBO_TOKEN as its bearer token):
//   - PUT /v8/artifacts/{hash}: an artifact (a task's outputs, a tar),
//     with x-artifact-duration (the task's milliseconds) and, with
//     signatures on, x-artifact-tag (the client's HMAC of it), kept as
//     given; 202;
//   - GET and HEAD /v8/artifacts/{hash}: 200 with the body and those two
//     headers, or 404; the client checks the tag itself, and refuses an
//     artifact whose tag does not verify;
//   - POST /v8/artifacts: which of {"hashes": [...]} are stored;
//   - POST /v8/artifacts/events: the client's hit and miss events,
//     counted (Stats.ArtifactEvents);
//   - GET /v8/artifacts/status: {"status":"enabled"}.
//
// The teamId or slug query parameter names whose artifact it is: each
// team's hashes are apart. Artifacts are keyed entries of the namespace
// "turbo", written once, as Nx's are: a PUT of a hash stored already is
// 409 and changes nothing (turbo PUTs only after a miss, so only a race
// or a forger meets it). Every request needs the right to read the
// namespace (the access file's /turbo rule), a PUT the right to write it.

const (
	turboPrefix    = "/v8/artifacts"
	turboNamespace = "turbo"
	// maxTurboBody bounds the JSON bodies of the query and the events.
	maxTurboBody = 1 << 20
	// maxTurboQuery bounds the hashes one query names.
	maxTurboQuery = 4096
	// maxArtifactTag bounds x-artifact-tag: an HMAC-SHA256 in base64 is 44
	// characters.
	maxArtifactTag = 1024
)

// isTurboPath reports whether p is served by serveTurbo.
func isTurboPath(p string) bool {
	return p == turboPrefix || strings.HasPrefix(p, turboPrefix+"/")
}

// turboRequest is what a request for /v8/artifacts... asks.
type turboRequest struct {
	// what: "query", "events", "status", or "artifact" (of hash).
	what string
	hash string
	// owner is the team: "teamId=ID", "slug=SLUG", or "" for neither.
	owner string
}

// parseTurboRequest parses a request's path and query: a hash as
// checkToolHash takes hex, a teamId or slug as a namespace's name
// (letters, digits, '.', '_', '-'); teamId wins over slug, as on Vercel.
func parseTurboRequest(path string, query url.Values) (turboRequest, error) {
	var tr turboRequest
	rest, ok := strings.CutPrefix(path, turboPrefix)
	if !ok || rest != "" && rest[0] != '/' {
		return turboRequest{}, fmt.Errorf("not a Turborepo cache path: want %s/{hash}", turboPrefix)
	}
	switch rest {
	case "", "/":
		tr.what = "query"
	case "/events":
		tr.what = "events"
	case "/status":
		tr.what = "status"
	default:
		tr.what, tr.hash = "artifact", rest[1:]
		if err := checkToolHash(tr.hash, true); err != nil {
			return turboRequest{}, err
		}
	}
	for _, name := range []string{"teamId", "slug"} {
		if vs := query[name]; len(vs) > 0 {
			if len(vs) > 1 {
				return turboRequest{}, fmt.Errorf("%s given %d times", name, len(vs))
			}
			if err := checkNamespace(vs[0]); err != nil {
				return turboRequest{}, fmt.Errorf("%s: %v", name, err)
			}
			if tr.owner == "" {
				tr.owner = name + "=" + vs[0]
			}
		}
	}
	return tr, nil
}

// key is the keyed entry of the artifact hash of tr's owner.
func (tr turboRequest) key(hash string) keyedPath {
	if tr.owner == "" {
		return keyedPath{namespace: turboNamespace, key: hash}
	}
	return keyedPath{namespace: turboNamespace, key: tr.owner + "/" + hash}
}

// parseArtifactAttrs reads a PUT's x-artifact-duration (decimal
// milliseconds) and x-artifact-tag (printable ASCII, no space) into a
// record's attrs: what url.Values.Encode writes of them, without the map.
func parseArtifactAttrs(header http.Header) (string, error) {
	// The canonical keys, as net/http stores them: no lookup canonicalizes.
	d, t := header["X-Artifact-Duration"], header["X-Artifact-Tag"]
	var attrs string
	if len(d) > 0 {
		if _, err := parseDecimal(d[0]); err != nil || len(d) > 1 || len(d[0]) > 18 {
			return "", fmt.Errorf("x-artifact-duration %q: want one number of milliseconds", cas.Clip(strings.Join(d, ",")))
		}
		attrs = "duration=" + d[0] // digits: nothing to escape
	}
	if len(t) > 0 {
		ok := len(t) == 1 && t[0] != "" && len(t[0]) <= maxArtifactTag
		for _, c := range []byte(t[0]) {
			ok = ok && c > 0x20 && c < 0x7f
		}
		if !ok {
			return "", fmt.Errorf("x-artifact-tag: want one tag of 1 to %d printable characters", maxArtifactTag)
		}
		if attrs != "" {
			attrs += "&"
		}
		attrs += "tag=" + url.QueryEscape(t[0])
	}
	return attrs, nil
}

// serveTurbo answers a request for /v8/artifacts....
func (h *Handler) serveTurbo(w http.ResponseWriter, r *http.Request) {
	tr, err := parseTurboRequest(r.URL.Path, r.URL.Query())
	if err != nil {
		h.answer(w, opOther, http.StatusBadRequest, err.Error())
		return
	}
	op, allow := opGetKeyed, ""
	switch {
	case tr.what == "artifact" && r.Method == http.MethodGet:
	case tr.what == "artifact" && r.Method == http.MethodHead:
		op = opHeadKeyed
	case tr.what == "artifact" && r.Method == http.MethodPut:
		op = opPutKeyed
	case tr.what == "artifact":
		allow = "GET, HEAD, PUT"
	case tr.what == "status" && r.Method != http.MethodGet:
		allow = "GET"
	case (tr.what == "query" || tr.what == "events") && r.Method != http.MethodPost:
		allow = "POST"
	}
	if allow != "" {
		w.Header().Set("Allow", allow)
		h.answer(w, opOther, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not served here: %s", r.Method, allow))
		return
	}
	r, ok := h.authorizeNamespace(w, r, op, turboNamespace)
	if !ok {
		return
	}
	switch tr.what {
	case "status":
		h.answerJSON(w, op, http.StatusOK, map[string]string{"status": "enabled"})
	case "events":
		h.turboEvents(w, r)
	case "query":
		h.turboQuery(w, r, tr)
	default:
		h.turboArtifact(w, r, op, tr)
	}
}

// turboArtifact answers GET, HEAD or PUT of an artifact.
func (h *Handler) turboArtifact(w http.ResponseWriter, r *http.Request, op operation, tr turboRequest) {
	kp := tr.key(tr.hash)
	if op == opPutKeyed {
		attrs, err := parseArtifactAttrs(r.Header)
		if err != nil {
			h.answer(w, op, http.StatusBadRequest, err.Error())
			return
		}
		if err := h.storeKeyed(w, r, kp, attrs, true); err != nil {
			h.failKeyed(w, r, op, "artifact "+tr.hash, err) // made only on failure: a PUT allocates little
			return
		}
		// {"urls": [path]}, written as json.Marshal would: the hash is hex.
		body := make([]byte, 0, 64+len(tr.hash))
		body = append(append(append(body, `{"urls":["`+turboPrefix+"/"...), tr.hash...), `"]}`...)
		h.answerBody(w, op, http.StatusAccepted, body)
		return
	}
	rec, err := h.openKeyed(r.Context(), kp)
	if err != nil {
		h.fail(w, r, op, "artifact "+tr.hash, err)
		return
	}
	defer rec.release()
	attrs, _ := url.ParseQuery(rec.attrs) // written by parseArtifactAttrs
	if d := attrs.Get("duration"); d != "" {
		w.Header().Set("x-artifact-duration", d)
	}
	if t := attrs.Get("tag"); t != "" {
		w.Header().Set("x-artifact-tag", t)
	}
	h.serveEntry(w, r, op, rec)
}

// artifactInfo is what a query answers of a stored artifact.
type artifactInfo struct {
	Size           int64  `json:"size"`
	TaskDurationMs int64  `json:"taskDurationMs"`
	Tag            string `json:"tag,omitempty"`
}

// parseArtifactQuery reads a query's body, {"hashes": [...]}, each hash
// as an artifact's path takes it.
func parseArtifactQuery(body []byte) ([]string, error) {
	var q struct {
		Hashes []string `json:"hashes"`
	}
	if err := json.Unmarshal(body, &q); err != nil {
		return nil, fmt.Errorf("the query is not {\"hashes\": [...]}: %v", err)
	}
	if len(q.Hashes) > maxTurboQuery {
		return nil, fmt.Errorf("a query of %d hashes: at most %d", len(q.Hashes), maxTurboQuery)
	}
	for _, hash := range q.Hashes {
		if err := checkToolHash(hash, true); err != nil {
			return nil, err
		}
	}
	return q.Hashes, nil
}

// turboQuery answers POST /v8/artifacts: for each hash asked, its size,
// duration and tag if it is stored, null if not.
func (h *Handler) turboQuery(w http.ResponseWriter, r *http.Request, tr turboRequest) {
	body, err := readSmallBody(w, r)
	if err != nil {
		h.fail(w, r, opGetKeyed, "the query", err)
		return
	}
	hashes, err := parseArtifactQuery(body)
	if err != nil {
		h.answer(w, opGetKeyed, http.StatusBadRequest, err.Error())
		return
	}
	found := make(map[string]*artifactInfo, len(hashes))
	for _, hash := range hashes {
		rec, err := h.lookupKeyed(r.Context(), tr.key(hash))
		if errors.Is(err, cas.ErrNotFound) {
			found[hash] = nil
			continue
		}
		if err != nil {
			h.fail(w, r, opGetKeyed, "artifact "+hash, err)
			return
		}
		attrs, _ := url.ParseQuery(rec.attrs)
		ms, _ := strconv.ParseInt(attrs.Get("duration"), 10, 64)
		found[hash] = &artifactInfo{Size: rec.content.Size, TaskDurationMs: ms, Tag: attrs.Get("tag")}
	}
	h.answerJSON(w, opGetKeyed, http.StatusOK, found)
}

// parseArtifactEvents reads an events body, a JSON array of objects, and
// returns how many there are.
func parseArtifactEvents(body []byte) (int, error) {
	var events []map[string]any
	if err := json.Unmarshal(body, &events); err != nil {
		return 0, fmt.Errorf("the events are not a JSON array of objects: %v", err)
	}
	return len(events), nil
}

// turboEvents answers POST /v8/artifacts/events: counted, and otherwise
// dropped.
func (h *Handler) turboEvents(w http.ResponseWriter, r *http.Request) {
	body, err := readSmallBody(w, r)
	if err != nil {
		h.fail(w, r, opGetKeyed, "the events", err)
		return
	}
	n, err := parseArtifactEvents(body)
	if err != nil {
		h.answer(w, opGetKeyed, http.StatusBadRequest, err.Error())
		return
	}
	h.stats.artifactEvents.Add(int64(n))
	h.answerJSON(w, opGetKeyed, http.StatusOK, struct{}{})
}

// readSmallBody reads a JSON request's body whole, at most maxTurboBody
// bytes: a longer one is cas.ErrTooLarge (413), one that breaks off
// cas.ErrMismatch (400).
func readSmallBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTurboBody))
	if errors.As(err, new(*http.MaxBytesError)) {
		return nil, fmt.Errorf("%w: a body of more than %d bytes", cas.ErrTooLarge, maxTurboBody)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", cas.ErrMismatch, err)
	}
	return body, nil
}

// answerJSON ends a request with code and v as JSON.
func (h *Handler) answerJSON(w http.ResponseWriter, op operation, code int, v any) {
	body, _ := json.Marshal(v) // maps and structs of strings and numbers
	h.answerBody(w, op, code, body)
}

// jsonContentType is every JSON answer's Content-Type, one slice for all:
// a header's values are replaced or appended to (which copies a full
// slice), never written in place.
var jsonContentType = []string{"application/json"}

// answerBody ends a request with code and body, JSON.
func (h *Handler) answerBody(w http.ResponseWriter, op operation, code int, body []byte) {
	h.stats.count(op, code)
	w.Header()["Content-Type"] = jsonContentType
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}
