// Package fill is the workload of `membuf bench fill` ([Fill]): N blobs
// written into a fresh `membuf serve` it starts (or into any server at an
// address), what the server's memory holds for them, and a graceful
// restart on the same store: how long until the server answers
// FindMissingBlobs correctly again, and how fast.
package fill

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/internal/serveprocess"
)

// Configuration names: the server the workload started, or one at an
// address.
const (
	ConfigServe  = measure.ConfigServe
	ConfigRemote = "remote"
)

// Limits and defaults. A blob is at least MinSize bytes, so that its
// 16-byte stamp makes it unique; at most MaxSize, since the client holds
// one blob's worth of base. A fill has at least ten blobs, one per tenth.
const (
	MinSize        = blobclient.StampLen
	MaxSize        = 1 << 30
	MinBlobs       = 10
	DefaultSample  = 10_000
	DefaultBatch   = 100
	MaxConnections = 64
)

// Options configure a fill.
type Options struct {
	// Addr is the gRPC address of a server to fill (loopback only),
	// which is neither restarted nor cleaned up; empty starts
	// `membuf serve` with Command on a store of its own, and restarts it
	// after the fill.
	Addr string
	// ServerPID, with Addr, is that server's process id: its CPU time and
	// resident set are then read from /proc/<pid>. 0: they are not.
	ServerPID int
	// Blobs is how many blobs to write, each Size bytes, over Streams
	// ByteStream streams at once, spread over Connections connections
	// (0: min(Streams, 4)).
	Blobs       int64
	Size        int64
	Streams     int
	Connections int
	// Instance is the REAPI instance name of every request.
	Instance string
	// ChunkSize is the data of one WriteRequest; 0 means 64 KiB.
	ChunkSize int
	// Sample is how many of the blobs written FindMissingBlobs asks about,
	// spread evenly over the fill (0: DefaultSample, or every blob if
	// there are fewer); Batch is how many present digests a call carries
	// (0: DefaultBatch).
	Sample, Batch int
	// Dir is where the started server's store gets a directory of its
	// own; empty means the system's temporary directory. The store is
	// removed after the run unless Keep.
	Dir  string
	Keep bool
	// StoreSize bounds the started server's store; 0 means space for
	// twice the blobs and 1 GiB more, so that nothing is evicted (an
	// evicted blob would be reported missing).
	StoreSize int64
	// Command and ServeFlags start the server (measure.StartServe);
	// ServeFlags come after the workload's own, so they win.
	Command    measure.Command
	ServeFlags []string
	// Seed makes the blobs' shared random base.
	Seed     uint64
	Progress measure.Progress
}

func (o *Options) validate() error {
	switch {
	case o.Blobs < MinBlobs:
		return fmt.Errorf("blobs %d: want at least %d (one per tenth of the fill)", o.Blobs, MinBlobs)
	case o.Size < MinSize || o.Size > MaxSize:
		return fmt.Errorf("blob size %d: want %d bytes to %s (the stamp that makes each blob unique is %d bytes)", o.Size, MinSize, report.FormatBytes(MaxSize), MinSize)
	case o.Streams < 1 || o.Streams > measure.MaxStreams:
		return fmt.Errorf("streams %d: want 1 to %d", o.Streams, measure.MaxStreams)
	case o.Connections < 0 || o.Connections > MaxConnections:
		return fmt.Errorf("connections %d: want 1 to %d", o.Connections, MaxConnections)
	case o.ChunkSize < 0 || o.ChunkSize > blobclient.MaxChunkSize:
		return fmt.Errorf("chunk size %d: want 1 byte to %s", o.ChunkSize, report.FormatBytes(blobclient.MaxChunkSize))
	case o.Sample < 0 || o.Batch < 0:
		return fmt.Errorf("sample %d and batch %d must not be negative", o.Sample, o.Batch)
	case o.StoreSize < 0:
		return fmt.Errorf("store size %d must not be negative", o.StoreSize)
	case o.ServerPID < 0:
		return fmt.Errorf("server process id %d is not a process id", o.ServerPID)
	}
	if o.Addr != "" {
		if len(o.ServeFlags) > 0 || o.Dir != "" || o.Keep || o.StoreSize != 0 {
			return errors.New("serve flags, a store directory, keeping it and its size are for the server the workload starts, not one at an address")
		}
		return nil
	}
	if o.ServerPID != 0 {
		return errors.New("a server process id is for a server at an address; the started server is observed anyway")
	}
	if o.Command == nil {
		return errors.New("no command to start membuf serve with, and no server address")
	}
	return nil
}

// Fill writes o.Blobs distinct blobs over o.Streams streams, measures the
// fill's rate overall and per tenth, and, for a server it can observe,
// the server's peak resident set during the fill against its resident set
// before (an empty server's, when Fill started it). Then it asks
// FindMissingBlobs about a sample of the blobs written, in batches that
// each carry one digest never written, and fails unless every answer is
// right. A server it started it then stops gracefully (SIGTERM) and starts
// again on the same store, timing the start up to the first correct
// FindMissingBlobs answer, and asks about the sample again.
//
// Every blob is a prefix of one random base (from Seed) followed by a
// 16-byte stamp of its number and the run's nonce (blobclient.Set): its
// digest costs the client a hash of 16 bytes from a saved state, so the
// client's CPU stays small beside the server's, and any blob's digest can
// be made again from its number: nothing per blob is kept, whatever N.
func Fill(ctx context.Context, o Options) (*report.Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	chunk := cmp0(o.ChunkSize, 64<<10)
	connections := cmp0(o.Connections, min(o.Streams, 4))
	sampleSize := int(min(int64(cmp0(o.Sample, DefaultSample)), o.Blobs))
	batch := min(cmp0(o.Batch, DefaultBatch), sampleSize)
	base := make([]byte, o.Size)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], o.Seed)
	rand.NewChaCha8(seed).Read(base)
	// A nonce of this run's keeps its blobs new to a server that kept an
	// earlier run's.
	set := blobclient.NewSet(base, []int64{o.Size}, uint64(time.Now().UnixNano()), 0, false, cas.SHA256)
	pool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		return nil, err
	}

	r := &report.Report{
		Workload: "fill",
		Started:  time.Now().UTC(),
		Machine:  report.ThisMachine(),
		Settings: map[string]string{
			"addr":        o.Addr,
			"blobs":       strconv.FormatInt(o.Blobs, 10),
			"sizes":       fmt.Sprint([]int64{o.Size}),
			"streams":     strconv.Itoa(o.Streams),
			"connections": strconv.Itoa(connections),
			"chunk_size":  strconv.Itoa(chunk),
			"seed":        strconv.FormatUint(o.Seed, 10),
			"content":     "a random base and a 16-byte stamp each",
			"sample":      strconv.Itoa(sampleSize),
			"batch":       strconv.Itoa(batch),
		},
		Configs: []string{ConfigRemote},
		GCScope: report.GCScopeServer,
	}
	addr := o.Addr
	var probe *measure.Probe
	var srv *serveprocess.Process
	var start func() (*serveprocess.Process, error)
	if addr == "" {
		dir, err := os.MkdirTemp(o.Dir, "membuf-bench-fill-*")
		if err != nil {
			return nil, err
		}
		if o.Keep {
			r.Settings["store"] = dir
		} else {
			defer os.RemoveAll(dir)
		}
		// Deferred after the removal, so run before it: the server stops
		// before its store goes.
		defer func() {
			if srv != nil {
				srv.Stop(syscall.SIGTERM)
			}
		}()
		storeSize := o.StoreSize
		if storeSize == 0 {
			storeSize = 2*o.Blobs*o.Size + 1<<30
		}
		start = func() (*serveprocess.Process, error) {
			return measure.StartServe(ctx, o.Command, dir, storeSize, chunk, o.ServeFlags...)
		}
		if srv, err = start(); err != nil {
			return nil, fmt.Errorf("starting membuf serve: %w", err)
		}
		addr = srv.GRPCAddr
		probe = measure.NewProbe(srv.Pid(), measure.MetricsURL(srv))
		r.Configs = []string{ConfigServe}
		r.Settings["serve_flags"] = fmt.Sprint(o.ServeFlags)
	} else if o.ServerPID != 0 {
		probe = measure.NewProbe(o.ServerPID, "")
	}

	f := &report.Fill{Blobs: o.Blobs, Size: o.Size, Streams: o.Streams}
	client, err := blobclient.Dial(addr, pool, connections, o.Instance, chunk)
	if err != nil {
		return nil, err
	}
	defer func() { client.Close() }()
	var mark measure.Mark
	if probe != nil {
		if f.BaseRSS, err = probe.RSS(); err != nil {
			return nil, err
		}
		if mark, err = probe.Begin(ctx); err != nil {
			return nil, err
		}
	}
	self := measure.NewProbe(os.Getpid(), "")
	selfMark, err := self.Begin(ctx)
	if err != nil {
		return nil, err
	}
	label := report.Case{Mode: "fill", Label: report.FormatBytes(o.Size)}
	if f.Wall, f.Deciles, err = write(ctx, client, set, &o, progressOf(o.Progress, label, r.Configs[0])); err != nil {
		return nil, err
	}
	selfUse, err := self.End(ctx, selfMark)
	if err != nil {
		return nil, err
	}
	f.ClientCPUSeconds = selfUse.CPUSeconds
	if probe != nil {
		use, err := probe.End(ctx, mark)
		if err != nil {
			return nil, err
		}
		f.Server = &use
	}
	s := newSample(set, o.Instance, o.Blobs, sampleSize, batch)
	if f.FindMissingBefore, err = s.pass(ctx, client); err != nil {
		return nil, fmt.Errorf("after the fill: %w", err)
	}

	if srv != nil {
		restart := &report.Restart{}
		client.Close()
		began := time.Now()
		err := srv.Stop(syscall.SIGTERM)
		srv = nil
		if err != nil {
			return nil, fmt.Errorf("stopping the filled server: %w", err)
		}
		restart.Stop = time.Since(began)
		began = time.Now()
		if srv, err = start(); err != nil {
			return nil, fmt.Errorf("restarting membuf serve on the filled store: %w", err)
		}
		restart.Listening = time.Since(began)
		if client, err = blobclient.Dial(srv.GRPCAddr, pool, connections, o.Instance, chunk); err != nil {
			return nil, err
		}
		if err := s.firstAnswer(ctx, client); err != nil {
			return nil, fmt.Errorf("after the restart: %w", err)
		}
		restart.Answering = time.Since(began)
		if restart.RSS, err = measure.NewProbe(srv.Pid(), "").RSS(); err != nil {
			return nil, err
		}
		f.Restart = restart
		after, err := s.pass(ctx, client)
		if err != nil {
			return nil, fmt.Errorf("after the restart: %w", err)
		}
		f.FindMissingAfter = &after
	}
	f.Finish()
	r.Fill = f
	return r, nil
}

// write writes blobs 0 to o.Blobs-1 of set over o.Streams streams and
// returns the wall time and, per tenth of the blobs in the order they
// completed, how many and in what time.
func write(ctx context.Context, client *blobclient.Client, set *blobclient.Set, o *Options, progress func(tenth int, d report.FillDecile, elapsed time.Duration)) (time.Duration, []report.FillDecile, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// ends[k] is when the blob that completed the (k+1)th tenth
	// completed: one worker sees each count, so one writes each end.
	var bounds, ends [10]int64
	for k := range bounds {
		bounds[k] = o.Blobs * int64(k+1) / 10
	}
	var next, done atomic.Int64
	errs := make([]error, o.Streams)
	size := strconv.FormatInt(o.Size, 10)
	began := time.Now()
	var wg sync.WaitGroup
	for w := range o.Streams {
		wg.Go(func() {
			conn := client.Conns[w%len(client.Conns)]
			h := sha256.New()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= o.Blobs {
					return
				}
				stamp := set.Stamp(uint64(i))
				name := blobclient.UploadName(client.Instance, uint64(i), "blobs/"+set.Digest(h, o.Size, &stamp)+"/"+size)
				if err := client.Write(ctx, conn, name, set.Base, o.Size, &stamp); err != nil {
					errs[w] = fmt.Errorf("blob %d: %w", i, err)
					cancel()
					return
				}
				n := done.Add(1)
				for k, b := range bounds {
					if n == b {
						elapsed := time.Since(began)
						ends[k] = int64(elapsed)
						if progress != nil {
							// A tenth's own rate needs the previous end,
							// which another worker may still be writing:
							// the display gets the rate so far.
							progress(k, report.FillDecile{Blobs: n, Wall: elapsed}, elapsed)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(began)
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	deciles := make([]report.FillDecile, len(bounds))
	var prevCount, prevEnd int64
	for k := range bounds {
		deciles[k] = report.FillDecile{Blobs: bounds[k] - prevCount, Wall: time.Duration(ends[k] - prevEnd)}
		prevCount, prevEnd = bounds[k], ends[k]
	}
	return wall, deciles, nil
}

// progressOf returns what reports a finished tenth to p as a stretch of
// ten, or nil for no p. Calls are serialised: tenths may finish at once.
func progressOf(p measure.Progress, c report.Case, config string) func(int, report.FillDecile, time.Duration) {
	if p == nil {
		return nil
	}
	var mu sync.Mutex
	return func(tenth int, so report.FillDecile, elapsed time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		p(measure.Event{Done: tenth + 1, Total: 10, Round: 1, Rounds: 1, Case: c, Config: config,
			OpsPerSec: float64(so.Blobs) / so.Wall.Seconds(), Elapsed: elapsed})
	}
}

// cmp0 returns v, or def when v is zero.
func cmp0[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
