package azure_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/azure"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want azure.Location
	}{
		{"azblob://acct1/cache", azure.Location{Account: "acct1", Container: "cache"}},
		{"azblob://acct1/cache/", azure.Location{Account: "acct1", Container: "cache"}},
		{"azblob://acct1/my-cache/a/b/", azure.Location{Account: "acct1", Container: "my-cache", Prefix: "a/b/"}},
		{"azblob://devstoreaccount1/c01/p?endpoint=http://127.0.0.1:10000/devstoreaccount1/", azure.Location{Account: "devstoreaccount1", Container: "c01", Prefix: "p/", Endpoint: "http://127.0.0.1:10000/devstoreaccount1"}},
	} {
		got, err := azure.ParseURL(tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct {
		raw, says string
	}{
		{"gs://acct/cont", "scheme must be azblob://"},
		{"azblob://user:password@acct/cont", "credentials do not go in the URL"},
		{"azblob://acct:443/cont", "account's name alone"},
		{"azblob://ab/cont", "3 to 24"},
		{"azblob://" + strings.Repeat("a", 25) + "/cont", "3 to 24"},
		{"azblob://Acct/cont", `'A' at position 0`},
		{"azblob://acc-t/cont", `'-' at position 3`},
		{"azblob://acct", "no container"},
		{"azblob://acct/", "no container"},
		{"azblob://acct/ab", "3 to 63"},
		{"azblob://acct/-cont", `'-' at position 0`},
		{"azblob://acct/co--nt", `'-' at position 3`},
		{"azblob://acct/Cont", `'C' at position 0`},
		{"azblob://acct/cont/a//b", "empty"},
		{"azblob://acct/cont/./b", `"."`},
		{"azblob://acct/cont?region=x", `unknown parameter "region"`},
		{"azblob://acct/cont?sv=2020&sig=abc", "AZURE_STORAGE_SAS_TOKEN"},
		{"azblob://acct/cont?endpoint=", "given once, with a value"},
		{"azblob://acct/cont?endpoint=tcp://h", "not an http:// or https:// URL"},
		{"azblob://acct/cont?endpoint=https://h/?sig=x", "not an http:// or https:// URL"},
	} {
		_, err := azure.ParseURL(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "azblob://ACCOUNT/CONTAINER[/PREFIX]") {
			t.Errorf("ParseURL(%q): %v; want an error saying %q and showing the right form", tc.raw, err, tc.says)
		}
	}
}

// TestParseURLHidesCredentials: a credential put where it must not be (a
// user and password, a SAS token in the URL or in the endpoint) is
// refused, and the error does not repeat it.
func TestParseURLHidesCredentials(t *testing.T) {
	for _, raw := range []string{
		"azblob://user:secret@acct/cont",
		"azblob://acct/cont?sv=2022-11-02&sig=secret",
		"azblob://acct/cont?sig=secret&endpoint=http://h",
		"azblob://acct/cont?endpoint=https://acct.blob.core.windows.net/?sig=secret",
		"azblob://acct/cont?endpoint=http://u:secret@host",
		"azblob://acct/cont?endpoint=http%3A%2F%2Fu%3Asecret%40host",
		"azblob://acct/cont?sig=secret&x=%zz",
	} {
		_, err := azure.ParseURL(raw)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): %v; want an error that does not repeat the credential", raw, err)
		}
	}
}

// FuzzParseURL: ParseURL never panics, what it accepts formats back to a
// URL it parses to the same Location, and what it refuses it says why of.
func FuzzParseURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := azure.ParseURL(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "azblob URL ") {
				t.Fatalf("ParseURL(%q): error %q does not say what it is about", raw, err)
			}
			return
		}
		if loc.Prefix != "" && !strings.HasSuffix(loc.Prefix, "/") {
			t.Fatalf("ParseURL(%q): prefix %q does not end in /", raw, loc.Prefix)
		}
		again, err := azure.ParseURL(loc.String())
		if err != nil || again != loc {
			t.Fatalf("ParseURL(%q) = %+v, whose String %q parses to %+v, %v", raw, loc, loc.String(), again, err)
		}
	})
}
