package gcs

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/membuf/membuf/cas/backend/internal/objstore"
)

// Location says where the backend is: a bucket, a key prefix inside it,
// and, for an emulator, its endpoint. ParseURL makes one from the
// --upstream URL.
type Location struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is prepended to every object name; empty, or ending in "/".
	Prefix string
	// Endpoint is the base URL (http or https) of a GCS emulator, such as
	// fake-gcs-server, reached without authentication; empty means
	// Google's, with Application Default Credentials.
	Endpoint string
}

// URLParameters lists the query parameters ParseURL accepts, for help
// texts.
const URLParameters = "endpoint=URL (an emulator, e.g. fake-gcs-server; no authentication)"

const form = "gs://BUCKET[/PREFIX][?endpoint=URL]"

// ParseURL parses gs://BUCKET[/PREFIX][?endpoint=URL]. The bucket name
// follows GCS's rules, the prefix is UTF-8 without empty segments, and
// endpoint, the only parameter, is an http or https URL with a host and
// nothing after its path; anything else is an error that says what was
// wrong. Credentials never go in the URL: they are Application Default
// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata
// server).
func ParseURL(raw string) (Location, error) {
	fail := func(format string, args ...any) (Location, error) {
		return Location{}, fmt.Errorf("gcs URL %q: %s (want %s)", objstore.ShowURL(raw), fmt.Sprintf(format, args...), form)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("%v", errorText(err))
	}
	if u.Scheme != "gs" {
		return fail("the scheme must be gs://")
	}
	if u.User != nil {
		return fail("credentials do not go in the URL; they are Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS)")
	}
	if u.Opaque != "" || u.Fragment != "" || u.Port() != "" {
		return fail("the host part is the bucket's name alone")
	}
	if err := checkBucket(u.Host); err != nil {
		return fail("%v", err)
	}
	loc := Location{Bucket: u.Host}
	if loc.Prefix, err = objstore.CheckPrefix(u.Path); err != nil {
		return fail("%v", err)
	}
	if loc.Endpoint, err = objstore.Endpoint(u.RawQuery, URLParameters); err != nil {
		return fail("%v", err)
	}
	return loc, nil
}

// String formats loc as the URL ParseURL reads; it holds no secret.
func (loc Location) String() string {
	u := url.URL{Scheme: "gs", Host: loc.Bucket, Path: "/" + loc.Prefix}
	if loc.Endpoint != "" {
		u.RawQuery = url.Values{"endpoint": {loc.Endpoint}}.Encode()
	}
	return u.String()
}

// checkBucket accepts the names GCS allows: 3 to 63 characters, or up to
// 222 in dot-separated parts of at most 63; lowercase letters, digits,
// hyphens, underscores and dots, starting and ending with a letter or
// digit; not starting with "goog" nor containing "google".
func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 222 || len(b) > 63 && !strings.Contains(b, ".") {
		return fmt.Errorf("bucket name %q must be 3 to 63 characters (222 with dots)", objstore.Clip(b))
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (c != '.' && c != '-' && c != '_' || i == 0 || i == len(b)-1) {
			return fmt.Errorf("bucket name %q: %q at position %d (lowercase letters, digits, and inner dots, hyphens and underscores only)", objstore.Clip(b), c, i)
		}
	}
	for part := range strings.SplitSeq(b, ".") {
		if part == "" || len(part) > 63 {
			return fmt.Errorf("bucket name %q: each dot-separated part must be 1 to 63 characters", objstore.Clip(b))
		}
	}
	if strings.HasPrefix(b, "goog") || strings.Contains(b, "google") {
		return fmt.Errorf("bucket name %q: GCS refuses names starting with \"goog\" or containing \"google\"", objstore.Clip(b))
	}
	return nil
}

// errorText is a url.Parse error without the URL it quotes again.
func errorText(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}
