package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/membuf/membuf/gcstats"
)

// fakeSizes are the payload sizes of fakeReport: bench grpc's defaults.
var fakeSizes = []int64{1, 32000, 33000, 256 << 10}

// fakeReport is a report with figures chosen by hand, for the drawing.
func fakeReport() *Report {
	r := &Report{Workload: "grpc", Configs: []string{"grpc-default", "membuf <&>"}}
	for _, m := range []string{"unary", "streaming"} {
		for i, size := range fakeSizes {
			for j, cfg := range r.Configs {
				r.Results = append(r.Results, Result{
					Case:      Case{Mode: m, Size: size, Label: FormatBytes(size)},
					Config:    cfg,
					Ops:       1000,
					Wall:      time.Second,
					OpsPerSec: float64(1000 * (4 - i) * (j + 1)),
					GC:        &gcstats.Result{GCCPUShare: 0.01 * float64(i+j)},
				})
			}
		}
	}
	return r
}

// svgSeries parses an SVG document strictly and returns the names of its
// series and legend entries.
func svgSeries(t *testing.T, doc []byte) (series, legend []string, points int) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	inLegend := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inLegend = false
			for _, a := range e.Attr {
				if e.Name.Local == "g" && a.Name.Local == "data-series" {
					series = append(series, a.Value)
				}
				if e.Name.Local == "text" && a.Name.Local == "class" && a.Value == "legend" {
					inLegend = true
				}
			}
			if e.Name.Local == "circle" {
				points++
			}
		case xml.CharData:
			if inLegend {
				legend = append(legend, string(e))
				inLegend = false
			}
		}
	}
	return series, legend, points
}

func TestPlots(t *testing.T) {
	r := fakeReport()
	dir := t.TempDir()
	paths, err := r.WritePlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"grpc-unary-throughput.svg", "grpc-unary-gc-cpu.svg", "grpc-streaming-throughput.svg", "grpc-streaming-gc-cpu.svg"}
	var got []string
	for _, p := range paths {
		got = append(got, filepath.Base(p))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	for _, p := range paths {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		series, legend, points := svgSeries(t, doc)
		if !slices.Equal(series, r.Configs) || !slices.Equal(legend, r.Configs) {
			t.Errorf("%s: series %q, legend %q, want %q", filepath.Base(p), series, legend, r.Configs)
		}
		if want := len(r.Configs) * len(fakeSizes); points != want {
			t.Errorf("%s: %d points, want %d", filepath.Base(p), points, want)
		}
		for _, label := range []string{"32000 B", "256 KiB", "payload size"} {
			if !bytes.Contains(doc, []byte(">"+label+"<")) {
				t.Errorf("%s: no label %q", filepath.Base(p), label)
			}
		}
	}
}

func TestPlotsWithoutGC(t *testing.T) {
	r := fakeReport()
	for i := range r.Results {
		r.Results[i].GC = nil
	}
	charts := r.Charts()
	for _, c := range charts {
		if c.YLabel == "GC CPU (% of all CPU)" {
			t.Errorf("chart %s drawn without GC figures", c.Name)
		}
	}
	if len(charts) != 2 {
		t.Errorf("%d charts, want one throughput chart per mode", len(charts))
	}
}
