package report

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A Chart is a line chart of one figure against payload size, one series
// per configuration.
type Chart struct {
	// Name is the file name WritePlots gives it, without .svg.
	Name                  string
	Title, XLabel, YLabel string
	// Subtitle says where the figures were measured.
	Subtitle string
	// LogY draws the Y axis in powers of ten.
	LogY   bool
	Ticks  []Tick // the X axis ticks: one per payload size
	Series []Series
}

// A Tick is a labelled position on the X axis.
type Tick struct {
	X     float64
	Label string
}

// A Series is one configuration's line.
type Series struct {
	Name   string
	Points []Point
}

// A Point is one case: X is the payload size in bytes (0 for a mix).
type Point struct{ X, Y float64 }

// Charts returns the report's charts: for each mode, throughput and the GC's
// share of CPU against payload size. GC charts are left out when the report
// has no GC figures.
func (r *Report) Charts() []Chart {
	var modes []string
	for _, c := range r.Cases() {
		if !slices.Contains(modes, c.Mode) {
			modes = append(modes, c.Mode)
		}
	}
	var charts []Chart
	for _, m := range modes {
		thr := Chart{
			Name:     fmt.Sprintf("%s-%s-throughput", r.Workload, m),
			Subtitle: r.Machine.String(),
			XLabel:   "payload size",
			LogY:     true,
		}
		gc := Chart{
			Name:     fmt.Sprintf("%s-%s-gc-cpu", r.Workload, m),
			Title:    fmt.Sprintf("membuf bench %s: %s, GC share of CPU", r.Workload, m),
			Subtitle: r.Machine.String(),
			XLabel:   "payload size",
			YLabel:   "GC CPU (% of all CPU)",
		}
		if r.Workload == "blobs" {
			thr.Title = fmt.Sprintf("membuf bench blobs: %s throughput", m)
			thr.YLabel = "MB/s (10^6 bytes per second)"
		} else {
			thr.Title = fmt.Sprintf("membuf bench %s: %s echoes per second", r.Workload, m)
			thr.YLabel = "operations per second"
		}
		hasGC := false
		for _, c := range r.Cases() {
			if c.Mode != m {
				continue
			}
			x := float64(c.Size) // a mix is one case per mode: one column either way
			if !slices.ContainsFunc(thr.Ticks, func(t Tick) bool { return t.X == x }) {
				thr.Ticks = append(thr.Ticks, Tick{x, c.Label})
			}
			for _, cfg := range r.Configs {
				res := r.Find(c, cfg)
				if res == nil {
					continue
				}
				y := res.OpsPerSec
				if r.Workload == "blobs" {
					y = res.MBPerSec
				}
				series := cfg
				if c.Streams > 0 {
					// One line per configuration and stream count.
					series = fmt.Sprintf("%s C=%d", cfg, c.Streams)
				}
				addPoint(&thr.Series, series, Point{x, y})
				if res.GC != nil {
					hasGC = true
					addPoint(&gc.Series, series, Point{x, res.GC.GCCPUShare * 100})
				}
			}
		}
		slices.SortStableFunc(thr.Ticks, func(a, b Tick) int { return cmp.Compare(a.X, b.X) })
		gc.Ticks = thr.Ticks
		charts = append(charts, thr)
		if hasGC {
			charts = append(charts, gc)
		}
	}
	return charts
}

func addPoint(series *[]Series, name string, p Point) {
	for i := range *series {
		if (*series)[i].Name == name {
			(*series)[i].Points = append((*series)[i].Points, p)
			return
		}
	}
	*series = append(*series, Series{Name: name, Points: []Point{p}})
}

// WritePlots writes each of the report's charts to dir as NAME.svg,
// creating dir if needed, and returns the files' paths.
func (r *Report) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, c := range r.Charts() {
		var buf bytes.Buffer
		if err := c.WriteSVG(&buf); err != nil {
			return nil, err
		}
		p := filepath.Join(dir, c.Name+".svg")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Layout of a chart, in SVG user units.
const (
	svgWidth, svgHeight       = 720, 420
	plotLeft, plotRight       = 80, 560 // the legend sits right of the plot
	plotTop, plotBottom       = 50, 350
	legendX                   = plotRight + 20
	markerRadius, strokeWidth = 3.5, 2
)

// palette holds colours that stay apart for most forms of colour blindness
// (Okabe and Ito).
var palette = []string{"rgb(0,114,178)", "rgb(213,94,0)", "rgb(0,158,115)", "rgb(204,121,167)", "rgb(230,159,0)", "rgb(86,180,233)"}

// WriteSVG draws the chart as a standalone SVG document, with one column on
// the X axis per payload size measured, in increasing order.
func (c *Chart) WriteSVG(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, svgHeight)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, esc(c.Title))
	if c.Subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="38" font-size="11" fill="rgb(85,85,85)">%s</text>`+"\n", plotLeft, esc(c.Subtitle))
	}

	// X: one evenly spaced column per payload size, in increasing order:
	// the sizes measured are few and unevenly spread (32,000 B and 33,000 B
	// sit side by side on a log scale), so the axis is ordinal.
	column := make(map[float64]int, len(c.Ticks))
	for i, t := range c.Ticks {
		column[t.X] = i
	}
	px := func(x float64) float64 {
		n := len(c.Ticks)
		if n <= 1 {
			return (plotLeft + plotRight) / 2
		}
		const pad = 0.06
		f := pad + (1-2*pad)*float64(column[x])/float64(n-1)
		return plotLeft + f*(plotRight-plotLeft)
	}

	// Y: from zero (linear) or the decade below the least value (log).
	var ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			ys = append(ys, p.Y)
		}
	}
	ymin, ymax := minMax(ys)
	var yTicks []float64
	var ty func(float64) float64
	if c.LogY {
		lo := math.Floor(math.Log10(math.Max(ymin, 1e-3)))
		hi := math.Ceil(math.Log10(math.Max(ymax, 1e-3)))
		if hi <= lo {
			hi = lo + 1
		}
		for e := lo; e <= hi; e++ {
			yTicks = append(yTicks, math.Pow(10, e))
		}
		ty = func(y float64) float64 {
			v := (math.Log10(math.Max(y, math.Pow(10, lo))) - lo) / (hi - lo)
			return plotBottom - v*(plotBottom-plotTop)
		}
	} else {
		step := niceStep(math.Max(ymax, 1e-9) / 5)
		top := math.Max(step, math.Ceil(ymax/step)*step)
		for v := 0.0; v <= top+step/2; v += step {
			yTicks = append(yTicks, v)
		}
		ty = func(y float64) float64 { return plotBottom - y/top*(plotBottom-plotTop) }
	}

	// Grid, ticks and axes.
	for _, v := range yTicks {
		y := ty(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y, plotRight, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", plotLeft-6, y, esc(formatTick(v)))
	}
	for _, t := range c.Ticks {
		x := px(t.X)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, plotTop, x, plotBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, plotBottom+18, esc(t.Label))
	}
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" fill="none" stroke="black"/>`+"\n", plotLeft, plotTop, plotBottom, plotRight)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (plotLeft+plotRight)/2, plotBottom+42, esc(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (plotTop+plotBottom)/2, esc(c.YLabel))

	// One line and its markers per series, and the legend.
	for i, s := range c.Series {
		color := palette[i%len(palette)]
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.X), ty(p.Y)))
		}
		fmt.Fprintf(&b, `<g class="series" data-series="%s">`+"\n", esc(s.Name))
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%d"/>`+"\n", strings.Join(pts, " "), color, strokeWidth)
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s"><title>%s: %s</title></circle>`+"\n",
				px(p.X), ty(p.Y), markerRadius, color, esc(s.Name), esc(formatTick(p.Y)))
		}
		fmt.Fprintf(&b, "</g>\n")
		ly := plotTop + 10 + 22*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%d"/>`+"\n", legendX, ly, legendX+24, ly, color, strokeWidth)
		fmt.Fprintf(&b, `<text class="legend" x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", legendX+30, ly, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func minMax(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 1
	}
	lo, hi = v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// niceStep rounds a step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func formatTick(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
