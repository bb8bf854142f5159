// Package reporttest checks what must hold of any finished report, for the
// workloads' tests.
package reporttest

import (
	"bytes"
	"testing"

	"github.com/membuf/membuf/bench/report"
)

// CheckConsistent checks what must hold of any finished report: every case
// under every configuration, operations counted equal to those the server
// served, payload bytes equal to ops times what one op moves (bytesPerOp;
// a negative answer skips the check, for sizes drawn from a mix),
// percentiles in order, and the report the same once read back from its
// JSON.
func CheckConsistent(t testing.TB, r *report.Report, cases int, bytesPerOp func(report.Result) int64) {
	t.Helper()
	if got, want := len(r.Results), cases*len(r.Configs); got != want {
		t.Fatalf("%d results, want %d (%d cases x %d configs)", got, want, cases, len(r.Configs))
	}
	for _, res := range r.Results {
		name := res.Case.String() + "/" + res.Config
		if res.Ops <= 0 {
			t.Errorf("%s: %d ops", name, res.Ops)
			continue
		}
		if res.ServerOps != nil && *res.ServerOps != res.Ops {
			t.Errorf("%s: client counted %d ops, server %d", name, res.Ops, *res.ServerOps)
		}
		if want := bytesPerOp(res); want >= 0 && res.Bytes != res.Ops*want {
			t.Errorf("%s: %d bytes for %d ops, want %d per op", name, res.Bytes, res.Ops, want)
		}
		if res.P50 <= 0 || res.P50 > res.P90 || res.P90 > res.P99 || res.P99 > res.Max {
			t.Errorf("%s: percentiles out of order: p50 %v p90 %v p99 %v max %v", name, res.P50, res.P90, res.P99, res.Max)
		}
		if res.OpsPerSec <= 0 || res.Wall <= 0 {
			t.Errorf("%s: %v ops/s over %v", name, res.OpsPerSec, res.Wall)
		}
		if res.GC != nil && res.GC.Ops != res.Ops {
			t.Errorf("%s: GC figures for %d ops, result has %d", name, res.GC.Ops, res.Ops)
		}
	}
	// The latency histograms are not encoded, so the report is compared
	// through its encoding: what was written must read back to the same.
	var first, second bytes.Buffer
	if err := r.WriteJSON(&first); err != nil {
		t.Fatal(err)
	}
	back, err := report.ReadReport(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := back.WriteJSON(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) {
		t.Errorf("report changed through JSON:\n%s\n%s", first.Bytes(), second.Bytes())
	}
}
