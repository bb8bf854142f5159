// Package build is the workload of `membuf bench build` ([Build]): a
// Bazel-like build's remote-cache traffic, a cold build and then its
// rebuild, against REAPI servers.
package buildmix

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
	"github.com/membuf/membuf/cas"
)

// Phases of the build workload, the modes of its two cases.
const (
	// PhaseUpload is a cold build: for each action a GetActionResult
	// that misses, a FindMissingBlobs of its output, the output's upload
	// (BatchUpdateBlobs when small, a ByteStream Write otherwise) and an
	// UpdateActionResult.
	PhaseUpload = "upload"
	// PhaseDownload is the rebuild after `bazel clean`: for each action a
	// GetActionResult that hits, and its output's download
	// (BatchReadBlobs when small, a ByteStream Read otherwise).
	PhaseDownload = "download"
)

// BazelMixLabel describes the sizes BazelMixSizes draws, for tables.
const BazelMixLabel = "bazel mix: 70% 1-16 KiB, 25% 16 KiB-1 MiB, 5% 1-8 MiB"

// BazelMixSizes returns n output sizes drawn with seed from the mix a
// 1,500-genrule Bazel build produced (the workspace of
// docs/bench/bazelmix/workspace.py): 70% of outputs 1-16 KiB, 25% 16 KiB
// to 1 MiB, 5% 1-8 MiB, log-uniform within each band.
func BazelMixSizes(n int, seed uint64) []int64 {
	rng := rand.New(rand.NewPCG(seed, 0x62617a656c)) // "bazel"
	sizes := make([]int64, n)
	for i := range sizes {
		lo, hi := 1.0*(1<<10), 16.0*(1<<10)
		switch u := rng.Float64(); {
		case u >= 0.95:
			lo, hi = 1<<20, 8<<20
		case u >= 0.70:
			lo, hi = 16<<10, 1<<20
		}
		sizes[i] = int64(math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo))))
	}
	return sizes
}

// BuildOptions configure the build workload.
type BuildOptions struct {
	// Addrs are REAPI servers (CAS, action cache and ByteStream) to
	// measure, each a configuration named by its address, beside those in
	// Configs.
	Addrs []string
	// ServerPIDs, when set, has one process id per Addrs entry (0 for
	// none): that server's CPU time and peak resident set are read from
	// /proc/<pid>.
	ServerPIDs []int
	// Configs are servers the workload starts on a store under Dir, as
	// processes of their own: only measure.ConfigServe so far.
	Configs []string
	// Instance is the REAPI instance name of every request.
	Instance string
	// Dir holds the started servers' stores; empty means a new temporary
	// directory, removed at the end.
	Dir string
	// Actions is how many actions one round builds; 0 means 1,000.
	Actions int
	// TreeEvery makes every TreeEvery-th action's output a directory (a
	// tree artifact): its result names a Tree, uploaded beside the output,
	// whose root holds the output and whose one subdirectory holds the
	// empty file, and a rebuild fetches the Tree before the output. 0:
	// every output a file.
	TreeEvery int
	// BatchMax is the largest output sent in a BatchUpdateBlobs and
	// fetched with BatchReadBlobs; larger ones go through ByteStream. 0
	// means 1 MiB. It is lowered to fit a server's advertised
	// max_batch_total_size_bytes.
	BatchMax int64
	Seed     uint64
	// ChunkSize is the data size of one ByteStream WriteRequest; 0 means
	// 64 KiB.
	ChunkSize int
	// StoreSize bounds the stores of the started servers; 0 means 8 GiB.
	StoreSize int64
	// RebuildAddrs, one per Addrs entry ("" for none), is where that
	// server's download phase goes instead: another node on the same
	// shared tier (a cold node, whose disk lacks the round's outputs),
	// after RebuildAfter, for the writer's uploads to reach the tier and
	// the reader to learn of them. RebuildPIDs are those servers' process
	// ids, as ServerPIDs.
	RebuildAddrs []string
	RebuildPIDs  []int
	RebuildAfter time.Duration
	// Command and ServeFlags start measure.ConfigServe (measure.StartServe).
	Command    func(args ...string) *exec.Cmd
	ServeFlags []string
	// Bounds: Rounds and Concurrency (the actions in flight at once, as
	// Bazel's --jobs) are used; Duration and Count are not, since a
	// round is one build.
	Bounds   measure.Bounds
	Progress measure.Progress
}

// Build measures what a Bazel-like build costs a cache server: in each
// round, for each configuration in turn (the order rotating between
// rounds), a cold build of Actions new actions (PhaseUpload) and then
// their rebuild with every action a hit (PhaseDownload), each phase
// measured on its own. Every action has one output, its size drawn from
// BazelMixSizes; every round's outputs are new blobs. The report's
// operations are actions: per phase, the wall time, actions per second,
// and for a server whose process can be observed its CPU time per 1,000
// actions and its peak resident set.
//
// The actions' inputs are not modelled: with a remote cache and local
// execution Bazel neither uploads nor downloads them.
func Build(ctx context.Context, o BuildOptions) (*report.Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	actions := cmp0(o.Actions, 1000)
	chunk := cmp0(o.ChunkSize, 64<<10)
	batchMax := cmp0(o.BatchMax, 1<<20)

	clientPool, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		return nil, err
	}
	var targets []*buildTarget
	dir := o.Dir
	if len(o.Configs) > 0 && dir == "" {
		if dir, err = os.MkdirTemp("", "membuf-bench-build-*"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	for _, name := range o.Configs {
		p, err := measure.StartServe(ctx, o.Command, filepath.Join(dir, name), cmp0(o.StoreSize, 8<<30), chunk, o.ServeFlags...)
		if err != nil {
			return nil, fmt.Errorf("%s server: %w", name, err)
		}
		defer p.Stop(syscall.SIGTERM)
		t, err := newBuildTarget(ctx, name, p.GRPCAddr, clientPool, o.Instance, chunk, batchMax, o.Bounds.Concurrency)
		if err != nil {
			return nil, err
		}
		defer t.close()
		t.probe = measure.NewProbe(p.Pid(), measure.MetricsURL(p))
		targets = append(targets, t)
	}
	for i, addr := range o.Addrs {
		t, err := newBuildTarget(ctx, addr, addr, clientPool, o.Instance, chunk, batchMax, o.Bounds.Concurrency)
		if err != nil {
			return nil, err
		}
		defer t.close()
		if i < len(o.ServerPIDs) && o.ServerPIDs[i] != 0 {
			t.probe = measure.NewProbe(o.ServerPIDs[i], "")
		}
		if i < len(o.RebuildAddrs) && o.RebuildAddrs[i] != "" {
			r, err := newBuildTarget(ctx, o.RebuildAddrs[i], o.RebuildAddrs[i], clientPool, o.Instance, chunk, batchMax, o.Bounds.Concurrency)
			if err != nil {
				return nil, err
			}
			defer r.close()
			if i < len(o.RebuildPIDs) && o.RebuildPIDs[i] != 0 {
				r.probe = measure.NewProbe(o.RebuildPIDs[i], "")
			}
			t.rebuild = r
		}
		targets = append(targets, t)
	}

	label := fmt.Sprintf("%d actions", actions)
	cases := []report.Case{{Mode: PhaseUpload, Label: label}, {Mode: PhaseDownload, Label: label}}
	results := make([]report.Result, len(cases)*len(targets))
	for j, t := range targets {
		for i, c := range cases {
			r := &results[i*len(targets)+j]
			r.Case, r.Config = c, t.name
			if t.phaseTarget(c.Mode).probe != nil {
				r.Server = &report.ServerUse{}
			}
		}
	}
	// One base of random bytes: every output is a prefix of it and a
	// stamp of its own.
	base := make([]byte, 8<<20)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], o.Seed)
	rand.NewChaCha8(seed).Read(base)
	total, done, start := o.Bounds.Rounds*len(targets)*len(cases), 0, time.Now()
	for round := range o.Bounds.Rounds {
		// New outputs and actions every round: each round's upload phase
		// is a cold build on every server.
		b := newBuildRound(base, actions, o.Seed, uint64(round), o.TreeEvery)
		for k := range targets {
			j := (k + round) % len(targets)
			t := targets[j]
			for i, c := range cases {
				res := &results[i*len(targets)+j]
				if o.Progress != nil {
					o.Progress(measure.Event{Starting: true, Done: done, Total: total, Round: round + 1, Rounds: o.Bounds.Rounds,
						Case: c, Config: t.name, OpsPerSec: res.OpsPerSec, Elapsed: time.Since(start)})
				}
				pt := t.phaseTarget(c.Mode)
				if pt != t {
					select {
					case <-time.After(o.RebuildAfter):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				if err := pt.runPhase(ctx, b, c.Mode, o.Bounds.Concurrency, res); err != nil {
					return nil, fmt.Errorf("round %d, %s phase, %s: %w", round+1, c.Mode, t.name, err)
				}
				res.Rounds++
				done++
				if o.Progress != nil {
					o.Progress(measure.Event{Done: done, Total: total, Round: round + 1, Rounds: o.Bounds.Rounds,
						Case: c, Config: t.name, OpsPerSec: res.OpsPerSec, Elapsed: time.Since(start)})
				}
			}
		}
	}
	for i := range results {
		results[i].Finish()
	}
	configs := make([]string, len(targets))
	for j, t := range targets {
		configs[j] = t.name
	}
	return &report.Report{
		Workload: "build",
		Started:  start.UTC(),
		Machine:  report.ThisMachine(),
		Settings: map[string]string{
			"mix":         "bazel (" + BazelMixLabel[len("bazel mix: "):] + ")",
			"seed":        strconv.FormatUint(o.Seed, 10),
			"blobs":       strconv.Itoa(actions),
			"chunk_size":  strconv.Itoa(chunk),
			"concurrency": strconv.Itoa(o.Bounds.Concurrency),
			"rounds":      strconv.Itoa(o.Bounds.Rounds),
			"tree_every":  strconv.Itoa(o.TreeEvery),
		},
		Configs: configs,
		Results: results,
		GCScope: report.GCScopeClient,
	}, nil
}

func (o *BuildOptions) validate() error {
	switch {
	case len(o.Configs) == 0 && len(o.Addrs) == 0:
		return errors.New("no server to measure: give a configuration or an address")
	case len(o.ServerPIDs) > len(o.Addrs):
		return fmt.Errorf("%d server process ids for %d addresses", len(o.ServerPIDs), len(o.Addrs))
	case o.TreeEvery < 0:
		return fmt.Errorf("tree every %d actions: must not be negative", o.TreeEvery)
	case o.Actions < 0 || o.Actions > MaxActions:
		return fmt.Errorf("actions %d: want 1 to %d", o.Actions, MaxActions)
	case o.BatchMax < 0:
		return fmt.Errorf("batch limit %d: must not be negative", o.BatchMax)
	case o.ChunkSize < 0 || o.ChunkSize > blobclient.MaxChunkSize:
		return fmt.Errorf("chunk size %d: want 1 byte to 2 MiB", o.ChunkSize)
	case o.Bounds.Rounds < 1:
		return fmt.Errorf("rounds must be at least 1, got %d", o.Bounds.Rounds)
	case o.Bounds.Concurrency < 1 || o.Bounds.Concurrency > measure.MaxStreams:
		return fmt.Errorf("concurrency %d: want 1 to %d", o.Bounds.Concurrency, measure.MaxStreams)
	}
	for _, c := range o.Configs {
		if c != measure.ConfigServe {
			return fmt.Errorf("configuration %q: the build workload starts only %s (give other servers by address)", c, measure.ConfigServe)
		}
		if o.Command == nil {
			return fmt.Errorf("configuration %s runs as a process of its own, and no command to start it was given", c)
		}
	}
	for _, a := range o.Addrs {
		if slices.Contains(o.Configs, a) {
			return fmt.Errorf("address %q has a configuration's name", a)
		}
	}
	return nil
}

// cmp0 returns v, or def when v is zero.
func cmp0[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// A buildRound is one round's actions: action i has digest actions[i] and
// one output, outputs.reads[i].
type buildRound struct {
	outputs *blobclient.Set
	actions []*repb.Digest
	digests []*repb.Digest // of the outputs
	// trees[i], for an action whose output is a directory, is its Tree
	// message and digest; nil for an output file.
	trees []*outputTree
}

// outputTree is a tree artifact's Tree, as the client uploads it.
type outputTree struct {
	data   []byte
	digest *repb.Digest
}

func newBuildRound(base []byte, n int, seed, round uint64, treeEvery int) *buildRound {
	sizes := BazelMixSizes(n, seed^round<<32)
	// The nonce makes this run's blobs new to a server that has seen an
	// earlier run's; the group, this round's new to this run's others.
	outputs := blobclient.NewSet(base, sizes, uint64(time.Now().UnixNano()), round, false, cas.SHA256)
	b := &buildRound{outputs: outputs}
	for i, ref := range outputs.Reads {
		hash, size := splitDigestName(ref.DigestName)
		b.digests = append(b.digests, &repb.Digest{Hash: hash, SizeBytes: size})
		// An action's digest: what Bazel hashes is the Action message;
		// any bytes unique to the action serve the server as well.
		var key [24]byte
		binary.LittleEndian.PutUint64(key[:], outputs.Nonce)
		binary.LittleEndian.PutUint64(key[8:], round)
		binary.LittleEndian.PutUint64(key[16:], uint64(i))
		sum := sha256.Sum256(key[:])
		b.actions = append(b.actions, &repb.Digest{Hash: hex.EncodeToString(sum[:]), SizeBytes: int64(len(key))})
		var tree *outputTree
		if treeEvery > 0 && i%treeEvery == 0 {
			tree = newOutputTree(b.digests[i])
		}
		b.trees = append(b.trees, tree)
	}
	return b
}

// emptyDigest is the empty blob's, always present.
var emptyDigest = &repb.Digest{Hash: hex.EncodeToString(func() []byte { s := sha256.Sum256(nil); return s[:] }())}

// newOutputTree is the Tree of a directory holding out as "out" and a
// subdirectory "sub" holding the empty file.
func newOutputTree(out *repb.Digest) *outputTree {
	child := &repb.Directory{Files: []*repb.FileNode{{Name: "empty", Digest: emptyDigest}}}
	childData, _ := proto.Marshal(child) // a message of known fields: cannot fail
	childSum := sha256.Sum256(childData)
	tree := &repb.Tree{
		Root: &repb.Directory{
			Files:       []*repb.FileNode{{Name: "out", Digest: out}},
			Directories: []*repb.DirectoryNode{{Name: "sub", Digest: &repb.Digest{Hash: hex.EncodeToString(childSum[:]), SizeBytes: int64(len(childData))}}},
		},
		Children: []*repb.Directory{child},
	}
	data, _ := proto.Marshal(tree)
	sum := sha256.Sum256(data)
	return &outputTree{data: data, digest: &repb.Digest{Hash: hex.EncodeToString(sum[:]), SizeBytes: int64(len(data))}}
}

// splitDigestName splits blobs/{hash}/{size}.
func splitDigestName(name string) (string, int64) {
	const prefix = len("blobs/")
	hash := name[prefix : prefix+2*sha256.Size]
	size, _ := strconv.ParseInt(name[prefix+2*sha256.Size+1:], 10, 64)
	return hash, size
}

// A buildTarget is one server of the build workload.
type buildTarget struct {
	name     string
	bytes    *blobclient.Client // ByteStream reads and writes, and the connections
	cas      []repb.ContentAddressableStorageClient
	ac       []repb.ActionCacheClient
	instance string
	batchMax int64
	probe    *measure.Probe
	rebuild  *buildTarget // where the download phase goes, if not here
}

// phaseTarget is the server phase runs on.
func (t *buildTarget) phaseTarget(phase string) *buildTarget {
	if phase == PhaseDownload && t.rebuild != nil {
		return t.rebuild
	}
	return t
}

// MaxActions is the most actions one round builds.
const MaxActions = 1 << 16

// buildConnections is how many client connections a target is driven
// over: Bazel 4 opens several (--remote_max_connections spreads calls
// over channels), and one TCP connection would cap a large upload.
const buildConnections = 4

func newBuildTarget(ctx context.Context, name, addr string, pool mem.BufferPool, instance string, chunk int, batchMax int64, concurrency int) (*buildTarget, error) {
	client, err := blobclient.Dial(addr, pool, min(buildConnections, concurrency), instance, chunk)
	if err != nil {
		return nil, err
	}
	conns := client.Conns
	t := &buildTarget{name: name, bytes: client, instance: instance, batchMax: batchMax}
	for _, c := range conns {
		t.cas = append(t.cas, repb.NewContentAddressableStorageClient(c))
		t.ac = append(t.ac, repb.NewActionCacheClient(c))
	}
	// Fit the batch limit to what the server takes, as a client reading
	// its capabilities does.
	caps, err := repb.NewCapabilitiesClient(conns[0]).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{InstanceName: instance})
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%s: GetCapabilities: %w", name, err)
	}
	if m := caps.GetCacheCapabilities().GetMaxBatchTotalSizeBytes(); m > 0 {
		// Space for the request's other fields: digest, status, framing.
		t.batchMax = min(t.batchMax, m-4<<10)
	}
	return t, nil
}

func (t *buildTarget) close() { t.bytes.Close() }

// runPhase builds every action of b in phase with n workers, and adds
// what it measured to res: actions as operations, output bytes as bytes.
func (t *buildTarget) runPhase(ctx context.Context, b *buildRound, phase string, n int, res *report.Result) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mark measure.Mark
	if t.probe != nil {
		var err error
		if mark, err = t.probe.Begin(ctx); err != nil {
			return err
		}
	}
	type tally struct {
		hist  report.Histogram
		bytes int64
		err   error
	}
	tallies := make([]tally, n)
	var next atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			tl := &tallies[w]
			conn := w % len(t.cas)
			var scratch []byte
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(b.actions) {
					return
				}
				t0 := time.Now()
				var err error
				if phase == PhaseUpload {
					scratch, err = t.upload(ctx, conn, b, i, scratch)
				} else {
					err = t.download(ctx, conn, b, i)
				}
				if err != nil {
					tl.err = fmt.Errorf("action %d: %w", i, err)
					cancel()
					return
				}
				tl.hist.Record(time.Since(t0))
				tl.bytes += b.digests[i].SizeBytes
			}
		})
	}
	wg.Wait()
	wall := time.Since(began)
	for i := range tallies {
		if tallies[i].err != nil {
			return tallies[i].err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.probe != nil {
		use, err := t.probe.End(ctx, mark)
		if err != nil {
			return err
		}
		res.Server.Add(use)
	}
	var latency report.Histogram
	var moved int64
	for i := range tallies {
		latency.Merge(&tallies[i].hist)
		moved += tallies[i].bytes
	}
	res.Record(int64(len(b.actions)), moved, wall, &latency)
	return nil
}

// upload is action i of a cold build: the cache misses, the action runs
// (not modelled), its output is uploaded if the server lacks it, and its
// result recorded. scratch is the caller's buffer for a batched output.
func (t *buildTarget) upload(ctx context.Context, conn int, b *buildRound, i int, scratch []byte) ([]byte, error) {
	action, out := b.actions[i], b.digests[i]
	_, err := t.ac[conn].GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: t.instance, ActionDigest: action})
	if status.Code(err) != codes.NotFound {
		return scratch, fmt.Errorf("GetActionResult of a new action: want NotFound, got %v", err)
	}
	missing, err := t.cas[conn].FindMissingBlobs(ctx, &repb.FindMissingBlobsRequest{InstanceName: t.instance, BlobDigests: []*repb.Digest{out}})
	if err != nil {
		return scratch, fmt.Errorf("FindMissingBlobs: %w", err)
	}
	if len(missing.GetMissingBlobDigests()) != 1 {
		return scratch, fmt.Errorf("FindMissingBlobs of a new output: %d missing, want 1", len(missing.GetMissingBlobDigests()))
	}
	ref := &b.outputs.Reads[i]
	plen := blobclient.PrefixLen(ref.Size)
	if ref.Size <= t.batchMax {
		scratch = append(append(scratch[:0], b.outputs.Base[:plen]...), ref.Stamp[:ref.Size-plen]...)
		resp, err := t.cas[conn].BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{
			InstanceName: t.instance,
			Requests:     []*repb.BatchUpdateBlobsRequest_Request{{Digest: out, Data: scratch}},
		})
		if err != nil {
			return scratch, fmt.Errorf("BatchUpdateBlobs: %w", err)
		}
		if r := resp.GetResponses(); len(r) != 1 || r[0].GetStatus().GetCode() != int32(codes.OK) {
			return scratch, fmt.Errorf("BatchUpdateBlobs: %v", resp.GetResponses())
		}
	} else {
		name := blobclient.UploadName(t.instance, uint64(i), ref.DigestName)
		if err := t.bytes.Write(ctx, t.bytes.Conns[conn], name, b.outputs.Base, ref.Size, &ref.Stamp); err != nil {
			return scratch, err
		}
	}
	if tree := b.trees[i]; tree != nil {
		resp, err := t.cas[conn].BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{
			InstanceName: t.instance,
			Requests:     []*repb.BatchUpdateBlobsRequest_Request{{Digest: tree.digest, Data: tree.data}},
		})
		if err != nil {
			return scratch, fmt.Errorf("BatchUpdateBlobs of a Tree: %w", err)
		}
		if r := resp.GetResponses(); len(r) != 1 || r[0].GetStatus().GetCode() != int32(codes.OK) {
			return scratch, fmt.Errorf("BatchUpdateBlobs of a Tree: %v", resp.GetResponses())
		}
	}
	_, err = t.ac[conn].UpdateActionResult(ctx, &repb.UpdateActionResultRequest{
		InstanceName: t.instance,
		ActionDigest: action,
		ActionResult: actionResult(i, out, b.trees[i]),
	})
	if err != nil {
		return scratch, fmt.Errorf("UpdateActionResult: %w", err)
	}
	return scratch, nil
}

// actionResult is what a genrule's action records: its one output file
// and a zero exit code; or, with tree, its one output directory.
func actionResult(i int, out *repb.Digest, tree *outputTree) *repb.ActionResult {
	path := "bazel-out/k8-fastbuild/bin/g" + strconv.Itoa(i) + ".out"
	if tree != nil {
		return &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: path, TreeDigest: tree.digest}}}
	}
	return &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: path, Digest: out}}}
}

// download is action i of the rebuild: the cache hits and the output is
// fetched.
func (t *buildTarget) download(ctx context.Context, conn int, b *buildRound, i int) error {
	ar, err := t.ac[conn].GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: t.instance, ActionDigest: b.actions[i]})
	if err != nil {
		return fmt.Errorf("GetActionResult of a built action: %w", err)
	}
	if tree := b.trees[i]; tree != nil {
		if dirs := ar.GetOutputDirectories(); len(dirs) != 1 || dirs[0].GetTreeDigest().GetHash() != tree.digest.Hash {
			return fmt.Errorf("GetActionResult: output directories %v, want the one uploaded, %v", dirs, tree.digest)
		}
		// A client restoring a tree artifact reads its Tree first.
		resp, err := t.cas[conn].BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{InstanceName: t.instance, Digests: []*repb.Digest{tree.digest}})
		if err != nil {
			return fmt.Errorf("BatchReadBlobs of a Tree: %w", err)
		}
		if r := resp.GetResponses(); len(r) != 1 || r[0].GetStatus().GetCode() != int32(codes.OK) || len(r[0].GetData()) != len(tree.data) {
			return fmt.Errorf("BatchReadBlobs of a Tree: %v", r)
		}
	} else if files := ar.GetOutputFiles(); len(files) != 1 || files[0].GetDigest().GetHash() != b.digests[i].Hash || files[0].GetDigest().GetSizeBytes() != b.digests[i].SizeBytes {
		return fmt.Errorf("GetActionResult: outputs %v, want the one uploaded, %v", files, b.digests[i])
	}
	size := b.digests[i].SizeBytes
	if size > t.batchMax {
		return t.bytes.Read(ctx, t.bytes.Conns[conn], blobclient.WithInstance(t.instance, b.outputs.Reads[i].DigestName), size)
	}
	resp, err := t.cas[conn].BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{InstanceName: t.instance, Digests: []*repb.Digest{b.digests[i]}})
	if err != nil {
		return fmt.Errorf("BatchReadBlobs: %w", err)
	}
	r := resp.GetResponses()
	if len(r) != 1 || r[0].GetStatus().GetCode() != int32(codes.OK) {
		return fmt.Errorf("BatchReadBlobs: %v", r)
	}
	// Sizes are checked, as bench blobs checks its reads; the tests check
	// the bytes.
	if int64(len(r[0].GetData())) != size {
		return fmt.Errorf("BatchReadBlobs: %d bytes, want %d", len(r[0].GetData()), size)
	}
	return nil
}
