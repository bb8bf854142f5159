package cli

import "testing"

func TestNearest(t *testing.T) {
	names := []string{"max-size", "max-batch-size", "scrub-rate", "word", "listen"}
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"max_size", "max-size", true},
		{"maxsize", "max-size", true},
		{"wrod", "word", true}, // a swap of neighbours is one edit
		{"scrub-rates", "scrub-rate", true},
		{"lsiten", "listen", true},
		{"cache-size", "", false},
		{"x", "", false},
	} {
		got, ok := Nearest(tc.name, names)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("Nearest(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}
