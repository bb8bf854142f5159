package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Fill is what `membuf bench fill` measured: N blobs written into a
// server, its memory for them, and a restart.
type Fill struct {
	// Blobs is how many blobs were written (N), each Size bytes, over
	// Streams ByteStream streams at once.
	Blobs   int64 `json:"blobs"`
	Size    int64 `json:"size"`
	Streams int   `json:"streams"`
	// Wall is how long the fill took; BlobsPerSec and MiBPerSec are its
	// rates over the whole fill.
	Wall        time.Duration `json:"wall_ns"`
	BlobsPerSec float64       `json:"blobs_per_sec"`
	MiBPerSec   float64       `json:"mib_per_sec"`
	// Deciles are the fill's tenths in order: a rate that falls from
	// the first to the last is a store that slows as it grows.
	Deciles []FillDecile `json:"deciles"`
	// Server is what the server process used during the fill (its peak
	// resident set included); nil when the server cannot be observed
	// (--addr without --server-pid).
	Server *ServerUse `json:"server,omitempty"`
	// ClientCPUSeconds is the CPU time the bench's own process (the
	// client) used during the fill: on a small machine the client
	// competes with the server for the CPUs.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
	// BaseRSS is the server's resident set before the fill: an empty
	// server's, when the bench started it.
	BaseRSS int64 `json:"base_rss_bytes,omitempty"`
	// RSSPerBlob is (Server.PeakRSS - BaseRSS) / Blobs.
	RSSPerBlob float64 `json:"rss_per_blob_bytes,omitempty"`
	// FindMissingBefore is FindMissingBlobs of the sample after the fill;
	// FindMissingAfter the same after the restart (nil without one).
	FindMissingBefore FindMissing  `json:"find_missing_before"`
	FindMissingAfter  *FindMissing `json:"find_missing_after,omitempty"`
	// Restart is the graceful stop and the start again on the same
	// store; nil for a server the bench did not start.
	Restart *Restart `json:"restart,omitempty"`
}

// A FillDecile is one tenth of a fill, in the order written.
type FillDecile struct {
	Blobs       int64         `json:"blobs"`
	Wall        time.Duration `json:"wall_ns"`
	BlobsPerSec float64       `json:"blobs_per_sec"`
}

// FindMissing is a pass of FindMissingBlobs over a sample of the blobs
// written, in batches; every answer was checked (every present digest
// reported present, the one absent digest each batch carries reported
// missing), so a finished report holds only correct passes.
type FindMissing struct {
	// Digests is how many present digests the pass asked about, Batch
	// how many a call carried (and one absent), Calls the calls made.
	Digests int `json:"digests"`
	Batch   int `json:"batch"`
	Calls   int `json:"calls"`
	// Latency percentiles of one call.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// NewFindMissing returns the figures of a pass of calls whose latencies
// are in h.
func NewFindMissing(digests, batch int, h *Histogram) FindMissing {
	return FindMissing{Digests: digests, Batch: batch, Calls: int(h.Count()),
		P50: h.Quantile(0.50), P99: h.Quantile(0.99), Max: h.Max()}
}

// Restart is a graceful stop of the server and its start again on the
// same store.
type Restart struct {
	// Stop is how long the graceful stop (SIGTERM to exit) took.
	Stop time.Duration `json:"stop_ns"`
	// Listening is the time from the new process's start to its listen
	// line; Answering, to its first correct FindMissingBlobs answer.
	Listening time.Duration `json:"listening_ns"`
	Answering time.Duration `json:"answering_ns"`
	// RSS is the new process's resident set at its first correct answer.
	RSS int64 `json:"rss_bytes"`
}

// Finish fills in the rates, the decile rates and the memory per blob
// from the totals.
func (f *Fill) Finish() {
	if s := f.Wall.Seconds(); s > 0 {
		f.BlobsPerSec = float64(f.Blobs) / s
		f.MiBPerSec = float64(f.Blobs*f.Size) / s / (1 << 20)
	}
	for i := range f.Deciles {
		d := &f.Deciles[i]
		if s := d.Wall.Seconds(); s > 0 {
			d.BlobsPerSec = float64(d.Blobs) / s
		}
	}
	if f.Server != nil {
		f.Server.finish(f.Blobs*f.Size, f.Blobs)
		if f.Blobs > 0 && f.BaseRSS > 0 {
			f.RSSPerBlob = float64(f.Server.PeakRSS-f.BaseRSS) / float64(f.Blobs)
		}
	}
}

// writeTable prints the fill's figures, one per line, then its deciles.
func (f *Fill) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "fill\t%d blobs of %s over %d streams in %s: %.0f blobs/s, %.1f MiB/s (the client's CPU: %.2f s)\n",
		f.Blobs, FormatBytes(f.Size), f.Streams, f.Wall.Round(time.Millisecond), f.BlobsPerSec, f.MiBPerSec, f.ClientCPUSeconds)
	if u := f.Server; u != nil {
		peak := formatFloatBytes(float64(u.PeakRSS))
		if u.PeakSinceStart {
			peak += " (since start)"
		}
		fmt.Fprintf(tw, "server during the fill\tCPU %.2f s (%.3f s per 1k blobs, of it kernel %.2f s), peak RSS %s\n",
			u.CPUSeconds, u.CPUSecondsPerKOp, u.SystemCPUSeconds, peak)
		if f.BaseRSS > 0 {
			fmt.Fprintf(tw, "RSS per blob\t%.0f B ((peak %s - %s before the fill) / %d blobs)\n",
				f.RSSPerBlob, peak, formatFloatBytes(float64(f.BaseRSS)), f.Blobs)
		}
	}
	writeFindMissing(tw, "FindMissingBlobs", &f.FindMissingBefore)
	if r := f.Restart; r != nil {
		fmt.Fprintf(tw, "restart\tstopped in %s; listening %s and answering FindMissingBlobs correctly %s after the start; RSS then %s\n",
			r.Stop.Round(time.Millisecond), r.Listening.Round(time.Millisecond), r.Answering.Round(time.Millisecond), formatFloatBytes(float64(r.RSS)))
	}
	if f.FindMissingAfter != nil {
		writeFindMissing(tw, "after the restart", f.FindMissingAfter)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nfill by tenths (blobs/s, in the order written):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "tenth\tblobs\twall\tblobs/s\tvs first\t\n")
	for i, d := range f.Deciles {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%s\t\n", i+1, d.Blobs, d.Wall.Round(time.Millisecond), d.BlobsPerSec, ratio(d.BlobsPerSec, f.Deciles[0].BlobsPerSec))
	}
	return tw.Flush()
}

func writeFindMissing(w io.Writer, label string, m *FindMissing) {
	fmt.Fprintf(w, "%s\t%d present digests in %d calls of %d (and one absent): p50 %s, p99 %s, max %s; every answer correct\n",
		label, m.Digests, m.Calls, m.Batch, formatLatency(m.P50), formatLatency(m.P99), formatLatency(m.Max))
}
