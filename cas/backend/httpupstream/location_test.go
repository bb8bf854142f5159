package httpupstream_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/httpupstream"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
)

func TestParseURL(t *testing.T) {
	good := map[string]httpupstream.Location{
		"http://cache":                                              {Address: "cache:80"},
		"https://cache/":                                            {TLS: true, Address: "cache:443"},
		"http://cache:9090/a/b-c.d_e~f":                             {Address: "cache:9090", Prefix: "a/b-c.d_e~f"},
		"http://[::1]:8080/cas-prefix":                              {Address: "[::1]:8080", Prefix: "cas-prefix"},
		"https://cache.example/p?ca=/ca.pem":                        {TLS: true, Address: "cache.example:443", Prefix: "p", CAFile: "/ca.pem"},
		"https://c:1?cert=c.pem&key=k.pem&auth_file=/run/secrets/u": {TLS: true, Address: "c:1", CertFile: "c.pem", KeyFile: "k.pem", AuthFile: "/run/secrets/u"},
	}
	for raw, want := range good {
		got, err := httpupstream.ParseURL(raw)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", raw, got, err, want)
			continue
		}
		if again, err := httpupstream.ParseURL(got.String()); err != nil || again != got {
			t.Errorf("ParseURL(%q) = %+v, %v: String does not round-trip %+v", got.String(), again, err, got)
		}
	}
	bad := map[string]string{
		"grpc://cache:8980":         "the scheme must be http:// or https://",
		"http://cache:":             "is not a number from 1 to 65535",
		"http://alice:secret@cache": "credentials do not go in the URL",
		"https://alice@cache":       "credentials do not go in the URL",
		"http://cache/a//b":         "empty, . or .. segment",
		"http://cache/a%2Fb":        "escaped characters",
		"http://cache/a?b=1":        `unknown parameter "b"`,
		"http://ca_che!/":           `has '!'`,
		"http://cache?auth_file=/f": "need TLS",
		"https://cache?key=k.pem":   "cert and key go together",
		"https://cache?ca=a&ca=b":   "parameter ca must be given once",
		"https://cache#f":           "fragment",
	}
	for raw, want := range bad {
		_, err := httpupstream.ParseURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q): %v, want an error saying %q", raw, err, want)
			continue
		}
		if !strings.Contains(err.Error(), "want http://HOST") {
			t.Errorf("ParseURL(%q): %v does not show the right form", raw, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): %v repeats the password", raw, err)
		}
	}
}

// FuzzParseURL: ParseURL never panics; what it accepts has a host and a
// port and round-trips through String; what it refuses never repeats a
// password the URL held.
func FuzzParseURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		upstreamtest.CheckParse(t, raw, httpupstream.ParseURL,
			func(l httpupstream.Location) string { return l.Address },
			func(l httpupstream.Location) bool {
				return l.TLS || l.CAFile == "" && l.CertFile == "" && l.KeyFile == "" && l.AuthFile == ""
			})
	})
}
