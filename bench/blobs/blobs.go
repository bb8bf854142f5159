// Package blobs is the workload of `membuf bench blobs` ([Blobs]):
// ByteStream (and HTTP cache) reads and writes of whole blobs against cas
// servers it starts in this process ([ConfigFreshSlice], [ConfigPrepared],
// [ConfigMembufZeroCopy]), as processes of their own ([ConfigServe], and
// [ConfigCeiling], whose server, [Ceiling], is here too), or against any
// server at an address.
package blobs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/cas"
)

// Blob modes.
const (
	ModeRead  = "read"
	ModeWrite = "write"
	// ModeStall starts an upload, sends its first message, holds the
	// stream open for BlobsOptions.Stall without sending more, then
	// abandons it: what a server holds for stalled clients.
	ModeStall = "stall"
)

// Configuration names of the blobs workload.
const (
	// ConfigFreshSlice is the cas server as bb-storage served before its
	// PR 339: a fresh slice per read chunk, grpc-go's default buffer pool
	// and its proto codec.
	ConfigFreshSlice = "fresh-slice"
	// ConfigPrepared is the cas server with Read served as bb-storage's PR
	// 339 serves it: one pooled buffer per reader, each chunk encoded into a
	// grpc.PreparedMsg (a copy into gRPC's buffer). Everything else,
	// writes included, is as in ConfigFreshSlice.
	ConfigPrepared = "prepared"
	// ConfigMembufZeroCopy is the cas server as `membuf serve` runs it: a
	// membuf.Pool for read chunks and for gRPC's buffers, and membuf's
	// ByteStream codec.
	ConfigMembufZeroCopy = "membuf"
	// ConfigServe is `membuf serve` itself, started as a process of its
	// own with BlobsOptions.Command on a store under Dir, and measured from
	// outside: its CPU time, peak resident set and GC cycles are its own.
	ConfigServe = measure.ConfigServe
	// ConfigRemote is a server at an address, in another process.
	ConfigRemote = "remote"
)

// processConfigs are the configurations that run as processes of their own.
var processConfigs = []string{ConfigServe, ConfigCeiling}

// BlobConfigs are every configuration the blobs workload can start.
var BlobConfigs = []string{ConfigFreshSlice, ConfigPrepared, ConfigMembufZeroCopy, ConfigServe, ConfigCeiling}

// DefaultBlobConfigs are the in-process servers compared by default.
var DefaultBlobConfigs = []string{ConfigFreshSlice, ConfigMembufZeroCopy}

// DefaultBlobSizes are sizes of the zero-copy benchmarks in docs/benchmarks.md
// that finish in seconds.
var DefaultBlobSizes = []int64{64 << 10, 1 << 20, 16 << 20}

// BlobsOptions configure the blobs workload.
type BlobsOptions struct {
	// Addr is the address of a ByteStream server to measure; empty starts
	// the cas server in this process, once per configuration, each on a
	// store in a directory under Dir.
	Addr string
	// HTTPAddr, with Addr, is the address of that server's HTTP cache
	// (GET and PUT of /cas/{sha256}), for the HTTP modes.
	HTTPAddr string
	// SeedAddr, if set, is the ByteStream server the blobs to read are
	// uploaded through instead of the measured one: an edge cache's
	// upstream, so that the edge's first read of each blob misses locally
	// and is filled from upstream (read each blob once: --count equal to
	// --blobs, one round).
	SeedAddr string
	// Instance is the REAPI instance name that prefixes resource names
	// (and, in the HTTP modes, paths).
	Instance string
	// Dir holds the in-process servers' stores; empty means a new
	// temporary directory, removed at the end.
	Dir string
	// Modes are of BlobModes; empty means read and write.
	Modes []string
	// DigestFunction names the blobs (the zero value: SHA-256). Another
	// goes with the ByteStream modes (read, write, read-zstd, write-zstd,
	// stall) only, and not with ConfigCeiling, which speaks SHA-256.
	DigestFunction cas.Function
	// Configs are the in-process servers to compare, in order:
	// ConfigFreshSlice, ConfigPrepared, ConfigMembufZeroCopy. Empty means
	// DefaultBlobConfigs. Must be empty with Addr.
	Configs []string
	// Sizes are fixed blob sizes, one case each; ignored when Mix is set.
	// Empty means DefaultBlobSizes.
	Sizes []int64
	// Content, when set, is what the blobs are made of, repeated as needed
	// (source text, say, for data that compresses); nil means random bytes
	// from Seed, which do not.
	Content []byte
	// Mix, when set, draws blob sizes from a log-normal spread with Seed.
	Mix  *LogNormal
	Seed uint64
	// Blobs is how many blobs each case uploads before measuring and then
	// reads (or, for writes, how many sizes it cycles through); 0 means 16.
	Blobs int
	// ChunkSize is the data size of one ReadResponse the in-process server
	// sends and of one WriteRequest the client sends; 0 means
	// cas.DefaultChunkSize.
	ChunkSize int
	// StoreSize bounds each store the workload starts; 0 means 8 GiB.
	StoreSize int64
	// Streams are the numbers of operations run at once, one case each;
	// empty means one case per size at Bounds.Concurrency.
	Streams []int
	// Connections is the most client connections each server is driven
	// over: a case of C streams spreads them over min(C, Connections)
	// connections, in turn. 0 means 1.
	Connections int
	// Command returns a command that runs this program (the membuf
	// binary) with args; ConfigServe and ConfigCeiling are started with
	// it. Needed only for those.
	Command func(args ...string) *exec.Cmd
	// ServeFlags are extra flags for ConfigServe's `membuf serve`.
	ServeFlags []string
	// ServerPID, with Addr, is the process id of the server at Addr: its
	// CPU time and peak resident set are then read from /proc/<pid>. 0
	// means they are not measured.
	ServerPID int
	// ServerMetrics, with Addr, is the URL of the server's Prometheus
	// metrics, from which its GC cycles are read; empty means they are not.
	ServerMetrics string
	// Stall is how long a ModeStall operation holds its stream; 0 means
	// 5 seconds.
	Stall    time.Duration
	Bounds   measure.Bounds
	Progress measure.Progress
}

// Blobs measures ByteStream reads and writes of whole blobs. Before
// measuring it uploads, per case, a set of blobs of the case's size (or of
// sizes drawn from the mix); a read operation reads one of them, a write
// operation uploads a new blob (its last 16 bytes make it unique) and waits
// for the server to commit it, fsync included.
//
// With no Addr it compares in-process cas servers (Configs: by default
// ConfigFreshSlice and ConfigMembufZeroCopy), and reports the process's GC
// figures for each. With
// Addr it measures that server alone, and the GC figures are the client's:
// subtract them from an in-process run's to estimate a server's own.
//
// The client is the same for every configuration, and its own code copies
// no data: with grpcmem's codec it receives read data as references into
// the frames gRPC read (counted, then freed) and sends write data by
// reference from one buffer shared by all writes (only each blob's 16-byte
// stamp is copied, since grpc-go does not reference-count buffers that
// small). grpc-go's
// client transport under it still allocates per call and per HTTP/2 frame
// (about 12 KiB per 1 MiB read, measured with Addr): next to the zero-copy
// server, that is most of what the process allocates.
func Blobs(ctx context.Context, o BlobsOptions) (*report.Report, error) {
	cases, sets, err := o.plan()
	if err != nil {
		return nil, err
	}
	chunk := o.ChunkSize
	if chunk == 0 {
		chunk = cas.DefaultChunkSize
	}
	if chunk < 0 || chunk > blobclient.MaxChunkSize {
		return nil, fmt.Errorf("chunk size %d: want 1 byte to 2 MiB", chunk)
	}

	if o.Addr != "" && len(o.Configs) > 0 {
		return nil, errors.New("server configurations are for servers the workload starts; a server at an address is measured as it is")
	}
	if o.Addr == "" && (o.ServerPID != 0 || o.ServerMetrics != "" || o.HTTPAddr != "") {
		return nil, errors.New("a server's process id, metrics and HTTP address are for a server at an address")
	}
	for _, c := range o.Configs {
		if !slices.Contains(BlobConfigs, c) {
			return nil, fmt.Errorf("unknown blobs configuration %q: want one of %s", c, strings.Join(BlobConfigs, ", "))
		}
		if slices.Contains(processConfigs, c) && o.Command == nil {
			return nil, fmt.Errorf("configuration %s runs as a process of its own, and no command to start it was given", c)
		}
	}
	connections := o.Connections
	if connections == 0 {
		connections = 1
	}
	if connections < 0 || connections > MaxConnections {
		return nil, fmt.Errorf("connections %d: want 1 to %d", connections, MaxConnections)
	}

	clientPool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		return nil, err
	}
	var targets []*blobTarget
	var configs []string
	if o.Addr != "" {
		client, err := blobclient.Dial(o.Addr, clientPool, connections, o.Instance, chunk)
		if err != nil {
			return nil, err
		}
		defer client.Close()
		t := newBlobTarget(ConfigRemote, client, nil, sets)
		if o.HTTPAddr != "" {
			t.httpBase = "http://" + o.HTTPAddr
		}
		if o.ServerPID != 0 {
			t.Probe = measure.NewProbe(o.ServerPID, o.ServerMetrics)
		}
		targets = append(targets, t)
		configs = []string{ConfigRemote}
	} else {
		dir := o.Dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "membuf-bench-*"); err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
		}
		storeSize := o.StoreSize
		if storeSize == 0 {
			storeSize = 8 << 30
		}
		serverPool, err := membuf.NewPool(membuf.Config{})
		if err != nil {
			return nil, err
		}
		// The process default pool (the proto codec's) is switched per
		// configuration, only when the servers are in this process.
		grpcDefault := mem.DefaultBufferPool()
		defer experimental.SetDefaultBufferPool(grpcDefault)
		for _, name := range o.configs() {
			if slices.Contains(processConfigs, name) {
				p, err := o.startProcess(ctx, name, filepath.Join(dir, name), storeSize, chunk)
				if err != nil {
					return nil, fmt.Errorf("%s server: %w", name, err)
				}
				defer p.Stop(syscall.SIGTERM)
				client, err := blobclient.Dial(p.GRPCAddr, clientPool, connections, o.Instance, chunk)
				if err != nil {
					return nil, err
				}
				defer client.Close()
				t := newBlobTarget(name, client, nil, sets)
				if p.HTTPCacheAddr != "" {
					t.httpBase = "http://" + p.HTTPCacheAddr
				}
				t.Probe = measure.NewProbe(p.Pid(), measure.MetricsURL(p))
				// The client's gRPC uses grpc-go's own default pool, as
				// it does against a server at an address.
				t.Prepare = func() { experimental.SetDefaultBufferPool(grpcDefault) }
				targets = append(targets, t)
				configs = append(configs, name)
				continue
			}
			s, err := startBlobServer(filepath.Join(dir, name), storeSize, chunk, name, serverPool)
			if err != nil {
				return nil, fmt.Errorf("%s server: %w", name, err)
			}
			defer s.close()
			client, err := blobclient.Dial(s.addr, clientPool, connections, o.Instance, chunk)
			if err != nil {
				return nil, err
			}
			defer client.Close()
			t := newBlobTarget(name, client, s, sets)
			var codecPool mem.BufferPool = grpcDefault
			if name == ConfigMembufZeroCopy {
				codecPool = serverPool
			}
			t.Prepare = func() { experimental.SetDefaultBufferPool(codecPool) }
			targets = append(targets, t)
			configs = append(configs, name)
		}
	}

	stall := o.Stall
	if stall == 0 {
		stall = 5 * time.Second
	}
	for _, t := range targets {
		t.stall = stall
	}
	// Upload the read set of every read case to every server, outside the
	// measure (once per set: cases of different stream counts share one;
	// once more as keyed entries for the keyed reads, whose records the
	// others do not write).
	// With SeedAddr the read sets go to that server instead (an edge's
	// upstream), so that the measured server's first read of each blob
	// misses locally.
	var seed *blobclient.Client
	if o.SeedAddr != "" {
		var err error
		if seed, err = blobclient.Dial(o.SeedAddr, clientPool, connections, o.Instance, chunk); err != nil {
			return nil, err
		}
		defer seed.Close()
	}
	type setUpload struct {
		set   *blobclient.Set
		keyed bool
	}
	for _, t := range targets {
		if t.Prepare != nil {
			t.Prepare()
		}
		uploaded := map[setUpload]bool{}
		for _, c := range cases {
			set := sets[c]
			u := setUpload{set, c.Mode == ModeHTTPKeyedGet}
			if !readMode(c.Mode) || uploaded[u] {
				continue
			}
			uploaded[u] = true
			var err error
			switch {
			case httpMode(c.Mode):
				err = uploadHTTP(ctx, set, t, c.Mode)
			case seed != nil:
				err = set.Upload(ctx, seed)
			default:
				err = set.Upload(ctx, t.client)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: uploading the blobs to read: %w", t.Name, err)
			}
		}
	}

	r := &report.Report{
		Workload: "blobs",
		Started:  time.Now().UTC(),
		Machine:  report.ThisMachine(),
		Settings: map[string]string{
			"addr":        o.Addr,
			"http_addr":   o.HTTPAddr,
			"seed_addr":   o.SeedAddr,
			"modes":       fmt.Sprint(o.modes()),
			"blobs":       strconv.Itoa(o.blobs()),
			"chunk_size":  strconv.Itoa(chunk),
			"concurrency": fmt.Sprint(o.Bounds.Concurrency),
			"connections": strconv.Itoa(connections),
			"rounds":      fmt.Sprint(o.Bounds.Rounds),
			"duration":    o.Bounds.Duration.String(),
			"count":       fmt.Sprint(o.Bounds.Count),
		},
		Configs: configs,
		GCScope: report.GCScopeProcess,
	}
	if o.Addr != "" {
		r.GCScope = report.GCScopeClient
	}
	if len(o.Streams) > 0 {
		r.Settings["streams"] = fmt.Sprint(o.Streams)
	}
	r.Settings["content"] = "random"
	if len(o.Content) > 0 {
		r.Settings["content"] = fmt.Sprintf("a %d-byte file, repeated", len(o.Content))
	}
	if o.Mix != nil {
		r.Settings["mix"] = o.Mix.String()
		r.Settings["seed"] = strconv.FormatUint(o.Seed, 10)
	} else {
		r.Settings["sizes"] = fmt.Sprint(o.sizes())
	}
	plain := make([]*measure.Target, len(targets))
	for i, t := range targets {
		plain[i] = &t.Target
	}
	res, err := measure.Run(ctx, cases, plain, o.Bounds, o.Progress)
	if err != nil {
		return nil, err
	}
	r.Results = res
	return r, nil
}

func (o *BlobsOptions) modes() []string {
	if len(o.Modes) == 0 {
		return []string{ModeRead, ModeWrite}
	}
	return o.Modes
}

func (o *BlobsOptions) configs() []string {
	if len(o.Configs) == 0 {
		return DefaultBlobConfigs
	}
	return o.Configs
}

func (o *BlobsOptions) sizes() []int64 {
	if len(o.Sizes) == 0 {
		return DefaultBlobSizes
	}
	return o.Sizes
}

func (o *BlobsOptions) blobs() int {
	if o.Blobs == 0 {
		return 16
	}
	return o.Blobs
}

// Limits of the blobs workload: a blob is at most MaxBlobSize, so that a
// set of them fits a temporary directory and memory (a ByteStream message
// carries at most blobclient.MaxChunkSize, and a run keeps at most
// measure.MaxStreams in flight); a case uploads at most MaxBlobsPerCase
// blobs; a server is driven over at most MaxConnections connections.
const (
	MaxBlobSize     = 1 << 30
	MaxBlobsPerCase = 1 << 16
	MaxConnections  = 64
)

// plan returns the cases and, per case, the set of blobs it uses.
func (o *BlobsOptions) plan() ([]report.Case, map[report.Case]*blobclient.Set, error) {
	if o.Blobs < 0 || o.Blobs > MaxBlobsPerCase {
		return nil, nil, fmt.Errorf("blobs per case %d: want 1 to 65536", o.Blobs)
	}
	n := o.blobs()
	// One random prefix serves every blob; its content is the same on
	// every run with the same seed.
	type sized struct {
		label string
		sizes []int64
	}
	var groups []sized
	if o.Mix != nil {
		if err := o.Mix.Validate(); err != nil {
			return nil, nil, err
		}
		if o.Mix.Max > MaxBlobSize {
			return nil, nil, fmt.Errorf("mix maximum %d is over the %s a blob may have here", o.Mix.Max, report.FormatBytes(MaxBlobSize))
		}
		groups = append(groups, sized{o.Mix.String(), o.Mix.Draw(n, o.Seed)})
	} else {
		for _, s := range o.sizes() {
			if s < 1 || s > MaxBlobSize {
				return nil, nil, fmt.Errorf("blob size %d: want 1 byte to %s", s, report.FormatBytes(MaxBlobSize))
			}
			groups = append(groups, sized{report.FormatBytes(s), slices.Repeat([]int64{s}, n)})
		}
	}
	var largest int64
	for _, g := range groups {
		largest = max(largest, slices.Max(g.sizes))
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x626c6f6273)) // "blobs"
	base := make([]byte, largest)
	if len(o.Content) > 0 {
		for i := 0; i < len(base); i += len(o.Content) {
			copy(base[i:], o.Content)
		}
	} else {
		for i := 0; i < len(base); i += 8 {
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], rng.Uint64())
			copy(base[i:], w[:])
		}
	}
	// A nonce unique to this run keeps its blobs apart from any a server
	// at --addr kept from an earlier run.
	nonce := uint64(time.Now().UnixNano())

	var cases []report.Case
	sets := map[report.Case]*blobclient.Set{}
	for gi, g := range groups {
		set := blobclient.NewSet(base, g.sizes, nonce, uint64(gi), false, o.DigestFunction)
		// Compressed modes have blobs of their own, uploaded compressed.
		var zset *blobclient.Set
		for _, m := range o.modes() {
			if !slices.Contains(BlobModes, m) {
				return nil, nil, fmt.Errorf("unknown blobs mode %q: want one of %s", m, strings.Join(BlobModes, ", "))
			}
			set := set
			if zstdMode(m) {
				if zset == nil {
					zset = blobclient.NewSet(base, g.sizes, nonce, uint64(len(groups)+gi), true, o.DigestFunction)
					if err := zset.CompressPrefixes(); err != nil {
						return nil, nil, err
					}
				}
				set = zset
			}
			var size int64
			if o.Mix == nil {
				size = g.sizes[0]
			}
			streams := o.Streams
			if len(streams) == 0 {
				streams = []int{0} // measure.Bounds.Concurrency
			}
			for _, n := range streams {
				if n < 0 || n > measure.MaxStreams {
					return nil, nil, fmt.Errorf("streams %d: want 1 to %d", n, measure.MaxStreams)
				}
				c := report.Case{Mode: m, Size: size, Label: g.label, Streams: n}
				cases = append(cases, c)
				sets[c] = set
			}
		}
	}
	return cases, sets, nil
}
