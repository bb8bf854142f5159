package httpcache

import (
	"fmt"
	"net/http"
	"strings"
)

// Nx's self-hosted remote cache (Nx 20.8 and later: the server that
// NX_SELF_HOSTED_REMOTE_CACHE_SERVER names, its bearer token in
// NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN): GET and PUT of
// /v1/cache/{hash}, a task's outputs as one tar archive. Entries are keyed
// entries of the namespace "nx", written once: a PUT of a hash stored
// already is 409 and changes nothing, as Nx's own server answers, since
// an overwrite is how a cache is poisoned (a writer replacing another's
// outputs). A token that may only read (the access file's /nx rule) is
// 403 on PUT.

const (
	nxPrefix    = "/v1/cache/"
	nxNamespace = "nx"
	// maxToolHashLen bounds a tool's hash: Nx's are decimal numbers,
	// Turborepo's 16 hex digits.
	maxToolHashLen = 128
)

// isNxPath reports whether p is served by serveNx.
func isNxPath(p string) bool { return strings.HasPrefix(p, nxPrefix) }

// parseNxPath returns the hash /v1/cache/{hash} names: 1 to
// maxToolHashLen letters and digits, and nothing after it.
func parseNxPath(p string) (string, error) {
	hash, ok := strings.CutPrefix(p, nxPrefix)
	if !ok {
		return "", fmt.Errorf("not an Nx cache path: want %s{hash}", nxPrefix)
	}
	if err := checkToolHash(hash, false); err != nil {
		return "", err
	}
	return hash, nil
}

// checkToolHash accepts 1 to maxToolHashLen letters and digits, or with
// hexOnly hex digits of either case.
func checkToolHash(hash string, hexOnly bool) error {
	ok := hash != "" && len(hash) <= maxToolHashLen
	for _, c := range []byte(hash) {
		digit := '0' <= c && c <= '9'
		hexLetter := 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !digit && !hexLetter && (hexOnly || !letter) {
			ok = false
		}
	}
	if !ok {
		want := "letters and digits"
		if hexOnly {
			want = "hex digits"
		}
		return fmt.Errorf("hash %q: want 1 to %d %s", clipHash(hash), maxToolHashLen, want)
	}
	return nil
}

// clipHash shortens a hash too long to quote whole in an answer.
func clipHash(s string) string {
	if len(s) > maxToolHashLen+8 {
		return s[:maxToolHashLen] + "..."
	}
	return s
}

// serveNx answers a request for /v1/cache/{hash}.
func (h *Handler) serveNx(w http.ResponseWriter, r *http.Request) {
	hash, err := parseNxPath(r.URL.Path)
	if err != nil {
		h.answer(w, opOther, http.StatusBadRequest, err.Error())
		return
	}
	op, ok := h.getHeadOrPut(w, r, opGetKeyed)
	if !ok {
		return
	}
	r, ok = h.authorizeNamespace(w, r, op, nxNamespace)
	if !ok {
		return
	}
	kp := keyedPath{namespace: nxNamespace, key: hash}
	what := "Nx cache entry " + hash
	if op == opPutKeyed {
		if err := h.storeKeyed(w, r, kp, "", true); err != nil {
			h.failKeyed(w, r, op, what, err)
			return
		}
		h.answer(w, op, http.StatusOK, "stored")
		return
	}
	rec, err := h.openKeyed(r.Context(), kp)
	if err != nil {
		h.fail(w, r, op, what, err)
		return
	}
	defer rec.release()
	h.serveEntry(w, r, op, rec)
}
