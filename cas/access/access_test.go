package access

import (
	"testing"
)

func TestParseRule(t *testing.T) {
	for in, want := range map[string]string{
		"anyone":         "anyone",
		"authenticated":  "authenticated",
		"nobody":         "nobody",
		"bob, alice,bob": "alice,bob",
	} {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, bad := range []string{"", "alice,,bob", ","} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
	p := Policy{ReadCAS: Anyone(), WriteCAS: Authenticated(), ReadAC: Anyone(), WriteAC: Only("ci")}
	if got, want := p.String(), "read-cas=anyone write-cas=authenticated read-ac=anyone write-ac=ci"; got != want {
		t.Errorf("Policy.String() = %q; want %q", got, want)
	}
}
