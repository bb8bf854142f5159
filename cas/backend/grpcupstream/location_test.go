package grpcupstream_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/grpcupstream"
	"github.com/membuf/membuf/cas/backend/internal/upstreamtest"
)

func TestParseURL(t *testing.T) {
	good := map[string]grpcupstream.Location{
		"grpc://cache:8980":                      {Address: "cache:8980"},
		"grpc://cache:8980/":                     {Address: "cache:8980"},
		"grpc://10.0.0.1:8980/a/b-c.d_e~f":       {Address: "10.0.0.1:8980", Instance: "a/b-c.d_e~f"},
		"grpc://[::1]:8980/main":                 {Address: "[::1]:8980", Instance: "main"},
		"grpcs://cache.example:443/i?ca=/ca.pem": {TLS: true, Address: "cache.example:443", Instance: "i", CAFile: "/ca.pem"},
		"grpcs://c:1?cert=c.pem&key=k.pem&auth_file=/run/secrets/upstream": {TLS: true, Address: "c:1", CertFile: "c.pem", KeyFile: "k.pem", AuthFile: "/run/secrets/upstream"},
	}
	for raw, want := range good {
		got, err := grpcupstream.ParseURL(raw)
		if err != nil || got != want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", raw, got, err, want)
			continue
		}
		if again, err := grpcupstream.ParseURL(got.String()); err != nil || again != got {
			t.Errorf("ParseURL(%q) = %+v, %v: String does not round-trip %+v", got.String(), again, err, got)
		}
	}
	bad := map[string]string{
		"http://cache:8980":              "the scheme must be grpc:// or grpcs://",
		"grpc://cache":                   "no port",
		"grpc://cache:0":                 "is not a number from 1 to 65535",
		"grpc://cache:99999":             "is not a number from 1 to 65535",
		"grpc://:8980":                   "no host",
		"grpc://alice:secret@cache:8980": "credentials do not go in the URL",
		"grpc://cache:8980/a//b":         "empty, . or .. segment",
		"grpc://cache:8980/a/../b":       "empty, . or .. segment",
		"grpc://cache:8980/a/blobs":      `"blobs" is a word of REAPI resource names`,
		"grpc://cache:8980/a%2Fb":        "escaped characters",
		"grpc://cache:8980/a b":          `has ' '`,
		"grpc://cache:8980?ca=/ca.pem":   "need TLS",
		"grpc://cache:8980?auth_file=/f": "need TLS",
		"grpcs://cache:8980?cert=c.pem":  "cert and key go together",
		"grpcs://cache:8980?ca=a&ca=b":   "parameter ca must be given once",
		"grpcs://cache:8980?ca=":         "parameter ca must be given once, with a value",
		"grpcs://cache:8980?password=x":  `unknown parameter "password"`,
		"grpcs://cache:8980#frag":        "fragment",
		"grpc://cache:8980/%zz":          "not a URL",
	}
	for raw, want := range bad {
		_, err := grpcupstream.ParseURL(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURL(%q): %v, want an error saying %q", raw, err, want)
			continue
		}
		if !strings.Contains(err.Error(), "want grpc://HOST:PORT") {
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
		upstreamtest.CheckParse(t, raw, grpcupstream.ParseURL,
			func(l grpcupstream.Location) string { return l.Address },
			func(l grpcupstream.Location) bool {
				return l.TLS || l.CAFile == "" && l.CertFile == "" && l.KeyFile == "" && l.AuthFile == ""
			})
	})
}
