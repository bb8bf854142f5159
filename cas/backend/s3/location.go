package s3

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Location says where the shared tier is: a bucket, a key prefix inside it,
// and how to reach it. ParseURL makes one from the --s3 URL.
type Location struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is prepended to every object key; empty, or ending in "/".
	Prefix string
	// Endpoint is the service's base URL (http or https), for stores other
	// than AWS S3; empty means the SDK's AWS endpoint for Region.
	Endpoint string
	// Region is the signing region; empty means the one the AWS
	// configuration names (AWS_REGION, the shared config file), or
	// us-east-1 with an Endpoint.
	Region string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// instead of the host name (bucket.endpoint/key).
	PathStyle bool
	// Profile is the shared configuration profile to use; empty means
	// AWS_PROFILE or "default", as the SDK does.
	Profile string
}

// URLParameters lists the query parameters ParseURL accepts, for help
// texts.
const URLParameters = "endpoint=URL, region=NAME, path_style=true|false (default true with an endpoint), profile=NAME"

// ParseURL parses s3://bucket[/prefix][?parameters]. The parameters are
// endpoint (an http or https URL), region, path_style and profile; anything
// else is an error, as are a bad bucket name and an empty or unparsable
// value. Credentials are not part of the URL: they come from the standard
// AWS environment variables and shared files, as the AWS SDK finds them.
func ParseURL(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("s3 URL %q: %v", clip(s), err)
	}
	if u.Scheme != "s3" {
		return Location{}, fmt.Errorf("s3 URL %q: the scheme must be s3:// (s3://bucket/prefix?endpoint=...)", clip(s))
	}
	if u.User != nil {
		return Location{}, fmt.Errorf("s3 URL %q: credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a shared credentials file", clip(s))
	}
	if u.Opaque != "" || u.Fragment != "" {
		return Location{}, fmt.Errorf("s3 URL %q: want s3://bucket/prefix", clip(s))
	}
	loc := Location{Bucket: u.Host}
	if err := checkBucket(loc.Bucket); err != nil {
		return Location{}, fmt.Errorf("s3 URL %q: %v", clip(s), err)
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if strings.Contains(p, "//") {
			return Location{}, fmt.Errorf("s3 URL %q: the prefix %q has an empty path segment", clip(s), clip(p))
		}
		loc.Prefix = p + "/"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Location{}, fmt.Errorf("s3 URL %q: parameters: %v", clip(s), err)
	}
	pathStyle := ""
	for name, vs := range q {
		if len(vs) != 1 || vs[0] == "" {
			return Location{}, fmt.Errorf("s3 URL %q: parameter %s must be given once, with a value", clip(s), clip(name))
		}
		v := vs[0]
		switch name {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || e.RawQuery != "" || e.Fragment != "" {
				return Location{}, fmt.Errorf("s3 URL %q: endpoint %q is not an http:// or https:// URL with a host", clip(s), clip(v))
			}
			loc.Endpoint = strings.TrimSuffix(v, "/")
		case "region":
			loc.Region = v
		case "path_style":
			pathStyle = v
		case "profile":
			loc.Profile = v
		default:
			return Location{}, fmt.Errorf("s3 URL %q: unknown parameter %q (accepted: %s)", clip(s), clip(name), URLParameters)
		}
	}
	loc.PathStyle = loc.Endpoint != ""
	if pathStyle != "" {
		b, err := strconv.ParseBool(pathStyle)
		if err != nil {
			return Location{}, fmt.Errorf("s3 URL %q: path_style %q is not true or false", clip(s), clip(pathStyle))
		}
		loc.PathStyle = b
	}
	return loc, nil
}

// String formats loc as the URL ParseURL reads.
func (loc Location) String() string {
	u := url.URL{Scheme: "s3", Host: loc.Bucket, Path: "/" + loc.Prefix}
	q := url.Values{}
	if loc.Endpoint != "" {
		q.Set("endpoint", loc.Endpoint)
	}
	if loc.Region != "" {
		q.Set("region", loc.Region)
	}
	if loc.PathStyle != (loc.Endpoint != "") {
		q.Set("path_style", strconv.FormatBool(loc.PathStyle))
	}
	if loc.Profile != "" {
		q.Set("profile", loc.Profile)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// checkBucket accepts the names S3's rules allow for new buckets: 3 to 63
// lowercase letters, digits, dots and hyphens, starting and ending with a
// letter or digit.
func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q must be 3 to 63 characters", clip(b))
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if !alnum && (c != '.' && c != '-' || i == 0 || i == len(b)-1) {
			return fmt.Errorf("bucket name %q: %q at position %d (lowercase letters, digits, and inner dots and hyphens only)", clip(b), c, i)
		}
	}
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 100
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
