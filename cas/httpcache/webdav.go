package httpcache

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/membuf/membuf/cas"
)

// WebDAV, as much of it as a keyed namespace needs (RFC 4918), for
// sccache's WebDAV storage (Apache OpenDAL 0.55): it stats a path with
// PROPFIND (Depth 0), and before a PUT stats each parent collection,
// deepest first, making with MKCOL those it is told are missing. Here
// every collection exists: a namespace is flat, its keys' slashes are part
// of their names, so a PROPFIND of a collection answers that it is one and
// MKCOL has nothing to make.

// maxPropfindBody bounds the PROPFIND body read and discarded: every
// answer carries the same properties, whichever were asked for (allprop,
// as OpenDAL asks, gets them all).
const maxPropfindBody = 64 << 10

// propfind answers PROPFIND of a keyed path: 207 Multi-Status with one
// response, the resource itself, whatever the Depth (a collection's
// entries are not listed); 404 for an entry that is not stored, or whose
// content is no longer in the CAS (a GET of it would be a 404 too).
func (h *Handler) propfind(w http.ResponseWriter, r *http.Request, kp keyedPath) {
	if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, maxPropfindBody)); err != nil {
		h.fail(w, r, opPropfindKeyed, kp.String(), fmt.Errorf("%w: reading the PROPFIND body: %v", cas.ErrMismatch, err))
		return
	}
	switch d := r.Header.Get("Depth"); d {
	case "", "0", "1", "infinity":
	default:
		h.answer(w, opPropfindKeyed, http.StatusBadRequest, fmt.Sprintf("Depth %q: want 0, 1 or infinity", d))
		return
	}
	href := r.URL.EscapedPath()
	res := davResource{href: href, collection: kp.collection, modified: h.started}
	if !kp.collection {
		rec, err := h.lookupKeyed(r.Context(), kp)
		if err == nil {
			var stored bool
			stored, err = h.contentStored(r.Context(), rec)
			if err == nil && !stored {
				err = fmt.Errorf("%w: its content %s is no longer stored", cas.ErrNotFound, rec.content)
			}
		}
		if err != nil {
			h.fail(w, r, opPropfindKeyed, kp.String(), err)
			return
		}
		res.size, res.modified, res.etag = rec.content.Size, rec.modified, rec.content.Hash
	} else if len(href) > 0 && href[len(href)-1] != '/' {
		res.href += "/"
	}
	body := res.multistatus()
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusMultiStatus)
	h.stats.count(opPropfindKeyed, http.StatusMultiStatus)
	w.Write(body)
}

// mkcol answers MKCOL: 201, the collection being there already, as every
// collection is. (405, RFC 4918's answer for a collection that exists,
// OpenDAL takes as well; some clients take it for a failure.)
func (h *Handler) mkcol(w http.ResponseWriter, r *http.Request, kp keyedPath) {
	io.Copy(io.Discard, io.LimitReader(r.Body, maxPropfindBody))
	h.answer(w, opMkcolKeyed, http.StatusCreated, kp.String()+": every collection of a namespace exists")
}

// options answers OPTIONS of a keyed path, with no credentials needed:
// the methods, and that WebDAV is spoken (class 1).
func (h *Handler) options(w http.ResponseWriter) {
	w.Header().Set("Allow", keyedMethods)
	w.Header().Set("DAV", "1")
	h.answer(w, opOther, http.StatusOK, keyedMethods)
}

// davResource is what a PROPFIND reports of one resource.
type davResource struct {
	href       string // as the request named it, escaped
	collection bool
	size       int64
	modified   time.Time
	etag       string // the content's hash
}

// multistatus is the 207 body for r: the live properties OpenDAL parses
// (getlastmodified, RFC 1123 and always present; resourcetype, with
// collection or empty; getcontentlength; getetag), as nginx's WebDAV
// module writes them.
func (r davResource) multistatus() []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n" + `<D:multistatus xmlns:D="DAV:"><D:response><D:href>`)
	xml.EscapeText(&b, []byte(r.href))
	b.WriteString(`</D:href><D:propstat><D:prop>`)
	if r.collection {
		b.WriteString(`<D:resourcetype><D:collection/></D:resourcetype>`)
	} else {
		fmt.Fprintf(&b, `<D:resourcetype></D:resourcetype><D:getcontentlength>%d</D:getcontentlength><D:getcontenttype>application/octet-stream</D:getcontenttype><D:getetag>"%s"</D:getetag>`, r.size, r.etag)
	}
	fmt.Fprintf(&b, `<D:getlastmodified>%s</D:getlastmodified></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>`+"\n", r.modified.UTC().Format(http.TimeFormat))
	return b.Bytes()
}
