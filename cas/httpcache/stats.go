package httpcache

import (
	"sync/atomic"

	"github.com/membuf/membuf/cas/access"
)

// operation is what a request does: a method on a part of the cache.
type operation uint8

// A part's GET, HEAD and PUT follow each other, in that order
// (Handler.getHeadOrPut).
const (
	opGet operation = iota // GET /cas/
	opHead
	opPut
	opGetAC // GET /ac/; opGet + (opGetAC - opGet) for each method
	opHeadAC
	opPutAC
	opGetKeyed // GET of a keyed entry, /{namespace}/{key} (keyed.go)
	opHeadKeyed
	opPutKeyed
	opPropfindKeyed // WebDAV's PROPFIND of a keyed path (webdav.go)
	opMkcolKeyed    // WebDAV's MKCOL
	opGetGo         // GET of gocached's /action/{actionID} (gocached.go)
	opHeadGo
	opPutGo // PUT of gocached's /{actionID}/{outputID}
	opOther // a path or a method the cache does not serve
	numOperations
)

var operationNames = [numOperations]string{"get-cas", "head-cas", "put-cas", "get-ac", "head-ac", "put-ac", "get-keyed", "head-keyed", "put-keyed", "propfind-keyed", "mkcol-keyed", "get-go", "head-go", "put-go", "other"}

func (op operation) String() string { return operationNames[op] }

// access is the access policy's operation for op.
func (op operation) access() access.Operation {
	switch op {
	case opGet, opHead:
		return access.ReadCAS
	case opPut:
		return access.WriteCAS
	case opGetAC, opHeadAC, opGetKeyed, opHeadKeyed, opPropfindKeyed, opGetGo, opHeadGo:
		return access.ReadAC // a keyed entry is read and written as the action cache is
	}
	return access.WriteAC
}

// statusClientGone counts a request whose client left before it was
// answered (nginx's 499): nothing was sent.
const statusClientGone = 499

// counters are a Handler's statistics, counted as requests end.
type counters struct {
	// byStatus counts requests by operation and status code, for the codes
	// this handler answers (statusCodes).
	byStatus                          [numOperations][len(statusCodes)]atomic.Int64
	bytesIn, bytesOut                 atomic.Int64
	aborted                           atomic.Int64
	unauthenticated, permissionDenied atomic.Int64
	// artifactEvents counts the cache events Turborepo reports.
	artifactEvents atomic.Int64
}

// statusCodes are the codes the handler answers, in the order byStatus
// counts them.
var statusCodes = [...]int{200, 201, 202, 204, 206, 207, 400, 401, 403, 404, 405, 408, 409, 411, 413, 416, statusClientGone, 500, 503, 507}

func (c *counters) count(op operation, code int) {
	for i, sc := range statusCodes {
		if sc == code {
			c.byStatus[op][i].Add(1)
			return
		}
	}
	c.count(op, 500) // an unexpected code is the handler's fault
}

// Stats is a snapshot of a Handler's counters.
type Stats struct {
	// Requests counts the requests answered, by operation ("get-cas",
	// "put-ac", ..., "other") and status code (499: the client left before
	// an answer). Counts of zero are left out.
	Requests []RequestCount
	// BytesIn and BytesOut count body bytes received (PUTs) and sent
	// (GETs).
	BytesIn, BytesOut int64
	// Aborted counts responses cut short after they started: the client
	// left, or a blob failed its check mid-way (logged).
	Aborted int64
	// Unauthenticated and PermissionDenied count the requests the access
	// control refused (401 and 403).
	Unauthenticated, PermissionDenied int64
	// ArtifactEvents counts the cache hit and miss events Turborepo
	// clients reported (POST /v8/artifacts/events).
	ArtifactEvents int64
}

// RequestCount is how many requests did Operation and were answered Code.
type RequestCount struct {
	Operation string
	Code      int
	N         int64
}

// Stats returns a snapshot of the handler's counters.
func (h *Handler) Stats() Stats {
	c := &h.stats
	st := Stats{
		BytesIn:          c.bytesIn.Load(),
		BytesOut:         c.bytesOut.Load(),
		Aborted:          c.aborted.Load(),
		Unauthenticated:  c.unauthenticated.Load(),
		PermissionDenied: c.permissionDenied.Load(),
		ArtifactEvents:   c.artifactEvents.Load(),
	}
	for op := range numOperations {
		for i, code := range statusCodes {
			if n := c.byStatus[op][i].Load(); n > 0 {
				st.Requests = append(st.Requests, RequestCount{op.String(), code, n})
			}
		}
	}
	return st
}
