package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"4096", 4096},
		{"4096B", 4096},
		{"64K", 64 << 10},
		{"64k", 64 << 10},
		{"64KiB", 64 << 10},
		{"64kib", 64 << 10},
		{"64KB", 64000},
		{"10M", 10 << 20},
		{"10MiB", 10 << 20},
		{"10MB", 10_000_000},
		{"10G", 10 << 30},
		{"10GiB", 10 << 30},
		{"10GB", 10_000_000_000},
		{"2T", 2 << 40},
		{"2TiB", 2 << 40},
		{"2TB", 2_000_000_000_000},
		{" 3 G ", 3 << 30},
		{"8388607T", 8388607 << 40},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		in, wantErr string
	}{
		{"", "not a size"},
		{"G", "not a size"},
		{"-1G", "not a size"},
		{"1.5G", `unknown unit ".5G"`},
		{"10X", `unknown unit "X"`},
		{"10 gigs", `unknown unit "gigs"`},
		{"8388608T", "too large"},
		{"99999999999999999999", "too large"},
	} {
		got, err := ParseSize(tc.in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error", tc.in, got)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseSize(%q) error %q; want it to contain %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, 1024, 64 << 10, 10 << 30, 3 << 40, 1<<20 + 1} {
		s := FormatSize(n)
		got, err := ParseSize(s)
		if err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, s, got, err)
		}
	}
	if got := FormatSize(10 << 30); got != "10GiB" {
		t.Errorf("FormatSize(10 GiB) = %q; want 10GiB", got)
	}
}

func TestSizeFlag(t *testing.T) {
	var n int64 = 7
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(Size{P: &n}, "size", "")
	if err := fs.Parse([]string{"--size", "2MiB"}); err != nil || n != 2<<20 {
		t.Fatalf("--size 2MiB: n = %d, err %v", n, err)
	}
	err := fs.Parse([]string{"--size", "2 parsecs"})
	if err == nil || !strings.Contains(err.Error(), `"2 parsecs"`) || !strings.Contains(err.Error(), "-size") {
		t.Fatalf("--size '2 parsecs': error %v; want one naming the flag and the value", err)
	}
}
