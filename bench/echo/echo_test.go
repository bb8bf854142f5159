package echo

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/bench/report/reporttest"
)

func TestEchoReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sizes := []int64{1, 33000}
	r, err := Echo(ctx, EchoOptions{
		Sizes:  sizes,
		Bounds: measure.Bounds{Count: 60, Rounds: 2, Concurrency: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	reporttest.CheckConsistent(t, r, 2*len(sizes), func(res report.Result) int64 { return 2 * res.Size })
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
