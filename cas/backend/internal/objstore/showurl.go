package objstore

import (
	"net/url"
	"regexp"
)

// userinfo matches the user information of a URL in text: scheme://...@.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@]*@`)

// ShowURL is raw as an error message may quote it: clipped, without the
// user information of the URL, and with each parameter's value shown as
// ShowParameter does: where a user may have put a credential the parser
// is about to refuse (user:password@, an endpoint's, a SAS token's sig=).
func ShowURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Clip(userinfo.ReplaceAllString(raw, "$1"))
	}
	u.User = nil
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for _, vs := range q {
			for i, v := range vs {
				vs[i] = ShowParameter(v)
			}
		}
		u.RawQuery = q.Encode()
	} else {
		u.RawQuery = "..."
	}
	return Clip(u.String())
}

// ShowParameter is a parameter's value as an error message may quote it:
// a URL without its user information and query, clipped; anything else
// as "...", since it may be a credential (a SAS token's sig=).
func ShowParameter(v string) string {
	e, err := url.Parse(v)
	if err != nil || e.Scheme == "" || e.Opaque != "" {
		return "..."
	}
	e.User = nil
	if e.RawQuery != "" || e.ForceQuery {
		e.RawQuery, e.ForceQuery = "...", false
	}
	return Clip(e.String())
}
