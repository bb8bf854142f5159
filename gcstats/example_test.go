package gcstats_test

import (
	"fmt"
	"testing"

	"github.com/membuf/membuf/gcstats"
)

var sink []byte

func Example() {
	run := gcstats.Start()
	const ops = 10000
	for range ops {
		sink = make([]byte, 1024)
	}
	res := run.Stop(ops)
	// fmt.Print(res) prints a table of every figure.
	fmt.Printf("%.0f KiB and %.0f object per op\n", res.BytesPerOp/1024, res.ObjectsPerOp)
	// Output: 1 KiB and 1 object per op
}

// In a benchmark, Report adds the figures to the benchmark's output.
func ExampleResult_Report() {
	_ = func(b *testing.B) {
		run := gcstats.Start()
		for b.Loop() {
			sink = make([]byte, 1024)
		}
		run.Stop(int64(b.N)).Report(b)
	}
}
