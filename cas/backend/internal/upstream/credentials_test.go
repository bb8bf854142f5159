package upstream

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBasicAuth: the file's first line, without its line break, is the
// credentials; a file that is not user:password is an error naming the
// file and never its content.
func TestBasicAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for content, want := range map[string]string{
		"alice:open sesame\n":         "alice:open sesame",
		"alice:open sesame\r\nmore\n": "alice:open sesame",
		"alice:a:b":                   "alice:a:b",
	} {
		got, err := Target{AuthFile: write("ok", content)}.BasicAuth()
		if err != nil || got != "Basic "+base64.StdEncoding.EncodeToString([]byte(want)) {
			t.Errorf("BasicAuth of %q: %q, %v; want the header of %q", content, got, err, want)
		}
	}
	for _, content := range []string{"sesame-without-user\n", ":sesame\n", "alice:\n", "", strings.Repeat("sesame", 20000)} {
		p := write("bad", content)
		_, err := Target{AuthFile: p}.BasicAuth()
		if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "sesame") {
			t.Errorf("BasicAuth of %.30q: %v; want an error naming the file and not its content", content, err)
		}
	}
	if _, err := (Target{AuthFile: filepath.Join(dir, "missing")}).BasicAuth(); err == nil || !strings.Contains(err.Error(), "auth_file") {
		t.Errorf("BasicAuth of a missing file: %v; want an error naming auth_file", err)
	}
}
