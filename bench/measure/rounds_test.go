package measure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/bench/report"
)

// A failed operation is what the run reports, even when the server probe,
// whose last reading shares the run's context, can no longer read.
func TestRunStretchReportsTheFailedOperation(t *testing.T) {
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "go_gc_cycles_total_gc_cycles_total 7")
	}))
	defer metrics.Close()
	opErr := errors.New("upload refused")
	tgt := &Target{
		Name: "failing",
		Worker: func(ctx context.Context, c report.Case, w int) (Op, func(), error) {
			return func(ctx context.Context, seq int64) (int64, error) {
				if seq == 3 {
					return 0, opErr
				}
				return 1, nil
			}, func() {}, nil
		},
		MeasureGC: true,
		Probe:     NewProbe(os.Getpid(), metrics.URL),
	}
	var seq atomic.Int64
	res := report.Result{Case: report.Case{Mode: "write", Size: 1}}
	err := runStretch(context.Background(), tgt, res.Case, 2, time.Minute, 0, &seq, &res)
	if !errors.Is(err, opErr) {
		t.Fatalf("runStretch = %v, want the operation's error %q", err, opErr)
	}
	if res.Ops != 0 {
		t.Errorf("a failed stretch added %d operations to the result", res.Ops)
	}
}
