package loadgen

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"
)

// checkConsistent checks what must hold of any finished report: every case
// under every configuration, operations counted equal to those the server
// served, and payload bytes equal to ops times what one op moves.
func checkConsistent(t *testing.T, r *Report, cases int, bytesPerOp func(Result) int64) {
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
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// The latency histograms are not encoded; compare without them.
	strip := func(r *Report) *Report {
		c := *r
		c.Results = append([]Result(nil), r.Results...)
		for i := range c.Results {
			c.Results[i].latency = Histogram{}
		}
		return &c
	}
	if !reflect.DeepEqual(strip(r), strip(back)) {
		t.Errorf("report changed through JSON:\n%+v\n%+v", strip(r), back)
	}
}

func TestEchoReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int64{1, 33000}
	r, err := Echo(ctx, EchoOptions{
		Sizes:  sizes,
		Bounds: Bounds{Count: 60, Rounds: 2, Concurrency: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, r, 2*len(sizes), func(res Result) int64 { return 2 * res.Size })
	for _, res := range r.Results {
		if res.Ops != 60 {
			t.Errorf("%s/%s: %d ops, want exactly the count, 60", res.Case, res.Config, res.Ops)
		}
		if res.Rounds != 2 {
			t.Errorf("%s/%s: %d rounds, want 2", res.Case, res.Config, res.Rounds)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table.String())
}
