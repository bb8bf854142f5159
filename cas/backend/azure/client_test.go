package azure

import (
	"encoding/xml"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestParseListPage(t *testing.T) {
	body := `<?xml version="1.0" encoding="utf-8"?>
<EnumerationResults ServiceEndpoint="http://127.0.0.1:10000/devstoreaccount1" ContainerName="c"><Prefix>p/</Prefix><MaxResults>2</MaxResults>
<Blobs><Blob><Name>p/a&amp;b</Name><Properties><Content-Length>3</Content-Length></Properties><Metadata /></Blob>
<Blob><Name Encoded="true">p%2Fbad%EF%BF%BE%0B</Name><Properties /></Blob></Blobs><NextMarker>2!80!MDAwMDIx</NextMarker></EnumerationResults>`
	p, err := parseListPage([]byte(body))
	if err != nil || !slices.Equal(p.Names, []string{"p/a&b", "p/bad\uFFFE\x0b"}) || p.NextMarker != "2!80!MDAwMDIx" {
		t.Fatalf("%+v, %v", p, err)
	}
	last := `<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs /><NextMarker /></EnumerationResults>`
	if p, err := parseListPage([]byte(last)); err != nil || len(p.Names) != 0 || p.NextMarker != "" {
		t.Fatalf("the last, empty page: %+v, %v", p, err)
	}
	for _, bad := range []string{"<EnumerationResults><Blobs><Blob><Name>x", "<Error><Code>x</Code></Error>", `<EnumerationResults><Blobs><Blob><Name Encoded="true">%zz</Name></Blob></Blobs></EnumerationResults>`} {
		if p, err := parseListPage([]byte(bad)); err == nil {
			t.Errorf("parseListPage(%q) = %+v, want an error", bad, p)
		}
	}
}

func TestParseErrorBody(t *testing.T) {
	body := "\ufeff<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>ContainerNotFound</Code><Message>The specified container does not exist.\nRequestId:4b1c\nTime:2026-12-06T16:35:13.000Z</Message></Error>"
	if code, msg := parseErrorBody([]byte(body)); code != "ContainerNotFound" || msg != "The specified container does not exist." {
		t.Fatalf("parseErrorBody: %q, %q", code, msg)
	}
	for _, bad := range []string{"", "<html>bad gateway</html>", "<Error><Code>x"} {
		if code, msg := parseErrorBody([]byte(bad)); code != "" || msg != "" {
			t.Errorf("parseErrorBody(%q) = %q, %q; want none", bad, code, msg)
		}
	}
}

// FuzzParseListPage: parseListPage never panics, and the names it reads
// read back the same from a listing made of them (each percent-encoded,
// as the service sends a name XML cannot hold).
func FuzzParseListPage(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := parseListPage(body)
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString("<EnumerationResults><Blobs>")
		for _, name := range p.Names {
			b.WriteString(`<Blob><Name Encoded="true">` + url.QueryEscape(name) + "</Name></Blob>")
		}
		b.WriteString("</Blobs><NextMarker>")
		xml.EscapeText(&b, []byte(p.NextMarker))
		b.WriteString("</NextMarker></EnumerationResults>")
		again, err := parseListPage([]byte(b.String()))
		if err != nil || !slices.Equal(again.Names, p.Names) {
			t.Fatalf("names %q read back as %q, %v", p.Names, again.Names, err)
		}
	})
}

// FuzzParseErrorBody: parseErrorBody never panics, and what it reads
// is one trimmed line each.
func FuzzParseErrorBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		code, msg := parseErrorBody(body)
		for _, s := range []string{code, msg} {
			if s != strings.TrimSpace(s) || strings.Contains(msg, "\n") {
				t.Fatalf("parseErrorBody(%q) = %q, %q", body, code, msg)
			}
		}
	})
}
