package loadgen

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/grpcmem"
	"github.com/membuf/membuf/internal/serveprocess"
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
	ConfigServe = "serve"
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
	// Instance is the REAPI instance name that prefixes resource names
	// (and, in the HTTP modes, paths).
	Instance string
	// Dir holds the in-process servers' stores; empty means a new
	// temporary directory, removed at the end.
	Dir string
	// Modes are ModeRead, ModeWrite, ModeStall, ModeReadZstd,
	// ModeWriteZstd, ModeHTTPGet and ModeHTTPPut; empty means read and
	// write.
	Modes []string
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
	Bounds   Bounds
	Progress Progress
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
func Blobs(ctx context.Context, o BlobsOptions) (*Report, error) {
	cases, sets, err := o.plan()
	if err != nil {
		return nil, err
	}
	chunk := o.ChunkSize
	if chunk == 0 {
		chunk = cas.DefaultChunkSize
	}
	if chunk < 0 || chunk > MaxChunkSize {
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
		conns, err := dialBlobs(o.Addr, clientPool, connections)
		if err != nil {
			return nil, err
		}
		defer closeAll(conns)
		t := newBlobTarget(ConfigRemote, conns, nil, o.Instance, chunk, sets)
		if o.HTTPAddr != "" {
			t.httpBase = "http://" + o.HTTPAddr
		}
		if o.ServerPID != 0 {
			t.probe = newServerProbe(o.ServerPID, o.ServerMetrics)
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
				conns, err := dialBlobs(p.GRPCAddr, clientPool, connections)
				if err != nil {
					return nil, err
				}
				defer closeAll(conns)
				t := newBlobTarget(name, conns, nil, o.Instance, chunk, sets)
				if p.HTTPCacheAddr != "" {
					t.httpBase = "http://" + p.HTTPCacheAddr
				}
				t.probe = newServerProbe(p.Pid(), metricsURL(p))
				// The client's gRPC uses grpc-go's own default pool, as
				// it does against a server at an address.
				t.prepare = func() { experimental.SetDefaultBufferPool(grpcDefault) }
				targets = append(targets, t)
				configs = append(configs, name)
				continue
			}
			s, err := startBlobServer(filepath.Join(dir, name), storeSize, chunk, name, serverPool)
			if err != nil {
				return nil, fmt.Errorf("%s server: %w", name, err)
			}
			defer s.close()
			conns, err := dialBlobs(s.addr, clientPool, connections)
			if err != nil {
				return nil, err
			}
			defer closeAll(conns)
			t := newBlobTarget(name, conns, s, o.Instance, chunk, sets)
			var codecPool mem.BufferPool = grpcDefault
			if name == ConfigMembufZeroCopy {
				codecPool = serverPool
			}
			t.prepare = func() { experimental.SetDefaultBufferPool(codecPool) }
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
	type setUpload struct {
		set   *blobSet
		keyed bool
	}
	for _, t := range targets {
		if t.prepare != nil {
			t.prepare()
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
			if httpMode(c.Mode) {
				err = set.uploadHTTP(ctx, t, c.Mode)
			} else {
				err = set.upload(ctx, t)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: uploading the blobs to read: %w", t.name, err)
			}
		}
	}

	report := &Report{
		Workload: "blobs",
		Started:  time.Now().UTC(),
		Machine:  ThisMachine(),
		Settings: map[string]string{
			"addr":        o.Addr,
			"http_addr":   o.HTTPAddr,
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
		GCScope: GCScopeProcess,
	}
	if o.Addr != "" {
		report.GCScope = GCScopeClient
	}
	if len(o.Streams) > 0 {
		report.Settings["streams"] = fmt.Sprint(o.Streams)
	}
	report.Settings["content"] = "random"
	if len(o.Content) > 0 {
		report.Settings["content"] = fmt.Sprintf("a %d-byte file, repeated", len(o.Content))
	}
	if o.Mix != nil {
		report.Settings["mix"] = o.Mix.String()
		report.Settings["seed"] = strconv.FormatUint(o.Seed, 10)
	} else {
		report.Settings["sizes"] = fmt.Sprint(o.sizes())
	}
	plain := make([]*target, len(targets))
	for i, t := range targets {
		plain[i] = &t.target
	}
	res, err := runRounds(ctx, cases, plain, o.Bounds, o.Progress)
	if err != nil {
		return nil, err
	}
	report.Results = res
	return report, nil
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
// set of them fits a temporary directory and memory; a ByteStream message
// carries at most MaxChunkSize, under grpc-go's default 4 MiB receive
// limit with room to spare; a case uploads at most MaxBlobsPerCase blobs;
// a server is driven over at most MaxConnections connections.
const (
	MaxBlobSize     = 1 << 30
	MaxChunkSize    = 2 << 20
	MaxBlobsPerCase = 1 << 16
	MaxConnections  = 64
	MaxStreams      = 4096
)

// plan returns the cases and, per case, the set of blobs it uses.
func (o *BlobsOptions) plan() ([]Case, map[Case]*blobSet, error) {
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
			return nil, nil, fmt.Errorf("mix maximum %d is over the %s a blob may have here", o.Mix.Max, FormatBytes(MaxBlobSize))
		}
		groups = append(groups, sized{o.Mix.String(), o.Mix.Draw(n, o.Seed)})
	} else {
		for _, s := range o.sizes() {
			if s < 1 || s > MaxBlobSize {
				return nil, nil, fmt.Errorf("blob size %d: want 1 byte to %s", s, FormatBytes(MaxBlobSize))
			}
			groups = append(groups, sized{FormatBytes(s), slices.Repeat([]int64{s}, n)})
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

	var cases []Case
	sets := map[Case]*blobSet{}
	for gi, g := range groups {
		set := newBlobSet(base, g.sizes, nonce, uint64(gi), false)
		// Compressed modes have blobs of their own, uploaded compressed.
		var zset *blobSet
		for _, m := range o.modes() {
			if !slices.Contains(BlobModes, m) {
				return nil, nil, fmt.Errorf("unknown blobs mode %q: want one of %s", m, strings.Join(BlobModes, ", "))
			}
			set := set
			if zstdMode(m) {
				if zset == nil {
					zset = newBlobSet(base, g.sizes, nonce, uint64(len(groups)+gi), true)
					if err := zset.compressPrefixes(); err != nil {
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
				streams = []int{0} // Bounds.Concurrency
			}
			for _, n := range streams {
				if n < 0 || n > MaxStreams {
					return nil, nil, fmt.Errorf("streams %d: want 1 to %d", n, MaxStreams)
				}
				c := Case{Mode: m, Size: size, Label: g.label, Streams: n}
				cases = append(cases, c)
				sets[c] = set
			}
		}
	}
	return cases, sets, nil
}

// stampLen is the length of the suffix that makes each blob unique.
const stampLen = 16

// A blobSet is the blobs of one case. Blob i of the read set is
// base[:size-16] followed by a 16-byte stamp: a number and the run's nonce.
// Written blobs are built the same way with other numbers, so their digests
// cost a hash of 16 bytes from a saved state, not of the whole blob.
type blobSet struct {
	base   []byte
	sizes  []int64
	nonce  uint64
	group  uint64
	states map[int64][]byte // sha256 state after base[:prefixLen(size)]
	reads  []blobRef        // the read set
	// zstd sets are for the compressed modes: their names are
	// compressed-blobs/zstd/ names, and zprefix holds base[:l] compressed
	// for each prefix length l.
	zstd    bool
	zprefix map[int64][]byte
}

type blobRef struct {
	size       int64
	stamp      [stampLen]byte
	digestName string // blobs/{hash}/{size}, or compressed-blobs/zstd/{hash}/{size}
}

func prefixLen(size int64) int64 { return max(size-stampLen, 0) }

func newBlobSet(base []byte, sizes []int64, nonce, group uint64, zstd bool) *blobSet {
	s := &blobSet{base: base, sizes: sizes, nonce: nonce, group: group, states: map[int64][]byte{}, zstd: zstd}
	// Hash the base once, saving the state at each prefix length needed.
	lens := make([]int64, 0, len(sizes))
	for _, sz := range sizes {
		lens = append(lens, prefixLen(sz))
	}
	slices.Sort(lens)
	lens = slices.Compact(lens)
	h := sha256.New()
	var done int64
	for _, l := range lens {
		h.Write(base[done:l])
		done = l
		st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil {
			panic(err) // crypto/sha256 always marshals
		}
		s.states[l] = st
	}
	h = sha256.New()
	for i, sz := range sizes {
		// Read-set numbers have the top bit set; write numbers never do.
		ref := blobRef{size: sz}
		ref.stamp = s.stamp(1<<63 | group<<32 | uint64(i))
		ref.digestName = s.namePrefix() + s.digest(h, sz, &ref.stamp) + "/" + strconv.FormatInt(sz, 10)
		s.reads = append(s.reads, ref)
	}
	return s
}

// stamp returns the suffix of blob number n. The number comes first, least
// significant byte first, so that a blob shorter than the stamp (which is
// the stamp's first bytes) still differs from its neighbours: blobs of 8
// bytes or more are unique, blobs of k < 8 bytes repeat every 256^k.
func (s *blobSet) stamp(n uint64) [stampLen]byte {
	var st [stampLen]byte
	binary.LittleEndian.PutUint64(st[:8], n)
	binary.LittleEndian.PutUint64(st[8:], s.nonce)
	return st
}

// digest returns the hex SHA-256 of the blob of size with stamp st, using h
// as scratch.
func (s *blobSet) digest(h hash.Hash, size int64, st *[stampLen]byte) string {
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(s.states[prefixLen(size)]); err != nil {
		panic(err)
	}
	h.Write(st[:size-prefixLen(size)])
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// namePrefix is what comes before {hash}/{size} in the set's names.
func (s *blobSet) namePrefix() string {
	if s.zstd {
		return "compressed-blobs/zstd/"
	}
	return "blobs/"
}

// upload writes the read set to a server: compressed for a zstd set, each
// blob then read back compressed once and checked.
func (s *blobSet) upload(ctx context.Context, bt *blobTarget) error {
	for i := range s.reads {
		ref := &s.reads[i]
		name := uploadName(bt.instance, uint64(i), ref.digestName)
		var err error
		if s.zstd {
			err = bt.writeZstd(ctx, bt.conns[0], name, s.zprefix[prefixLen(ref.size)], stampFrame(nil, &ref.stamp, ref.size))
			if err == nil {
				err = s.checkZstdRead(ctx, bt, ref)
			}
		} else {
			err = bt.write(ctx, bt.conns[0], name, s.base, ref.size, &ref.stamp)
		}
		if err != nil {
			return fmt.Errorf("blob %s: %w", ref.digestName, err)
		}
	}
	return nil
}

// uploadName returns {instance}/uploads/{uuid}/{digestName} with a UUID
// made from n and the time.
func uploadName(instance string, n uint64, digestName string) string {
	t := uint64(time.Now().UnixNano())
	uuid := fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(t>>32), uint16(t>>16), uint16(t)&0xfff, uint16(n>>48)&0xfff, n&0xffffffffffff)
	return withInstance(instance, "uploads/"+uuid+"/"+digestName)
}

func withInstance(instance, name string) string {
	if instance == "" {
		return name
	}
	return instance + "/" + name
}

// blobTarget is one configuration of the blobs workload: client
// connections and, in process, the server they talk to.
type blobTarget struct {
	target
	conns    []*grpc.ClientConn
	http     *http.Client // for the HTTP modes
	httpBase string       // http://host:port of the server's HTTP cache; "": none
	stall    time.Duration
	instance string
	chunk    int
	sets     map[Case]*blobSet
}

var (
	readDesc  = grpc.StreamDesc{StreamName: "Read", ServerStreams: true}
	writeDesc = grpc.StreamDesc{StreamName: "Write", ClientStreams: true}
)

const (
	methodRead  = "/google.bytestream.ByteStream/Read"
	methodWrite = "/google.bytestream.ByteStream/Write"
)

// dialBlobs makes n client connections to addr: each grpc.ClientConn has a
// transport, so a TCP connection, of its own.
func dialBlobs(addr string, pool mem.BufferPool, n int) ([]*grpc.ClientConn, error) {
	var conns []*grpc.ClientConn
	for range n {
		c, err := grpc.NewClient(addr,
			grpc.WithContextDialer(dialLoopback),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			experimental.WithBufferPool(pool),
			grpc.WithDefaultCallOptions(grpcmem.CallOption()),
		)
		if err != nil {
			closeAll(conns)
			return nil, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

func closeAll(conns []*grpc.ClientConn) {
	for _, c := range conns {
		c.Close()
	}
}

// dialLoopback dials only loopback addresses: the workload sends traffic
// nowhere else, whatever the name it was given resolves to.
func dialLoopback(ctx context.Context, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("loadgen: refusing to dial %s: not a loopback address", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

func newBlobTarget(name string, conns []*grpc.ClientConn, s *blobServer, instance string, chunk int, sets map[Case]*blobSet) *blobTarget {
	bt := &blobTarget{conns: conns, http: newHTTPClient(), instance: instance, chunk: chunk, sets: sets}
	bt.target = target{name: name, worker: bt.worker, measureGC: true}
	if s != nil {
		bt.serverOps = s.completed.Load
	}
	return bt
}

func (bt *blobTarget) worker(ctx context.Context, c Case, w int) (op, func(), error) {
	set := bt.sets[c]
	if set == nil {
		return nil, nil, fmt.Errorf("no blobs for case %s", c)
	}
	// Worker w of a case of C streams uses connection w mod n: min(C, n)
	// connections, each carrying an equal share of the streams.
	conn := bt.conns[w%len(bt.conns)]
	if httpMode(c.Mode) {
		return bt.httpWorker(c, set, w)
	}
	switch c.Mode {
	case ModeRead, ModeReadZstd:
		names := make([]string, len(set.reads))
		for i, ref := range set.reads {
			names[i] = withInstance(bt.instance, ref.digestName)
		}
		// Workers start at different blobs, so that they do not all read
		// the same one at once.
		start := int64(w) * 7
		return func(ctx context.Context, seq int64) (int64, error) {
			i := (start + seq) % int64(len(names))
			size := set.reads[i].size
			want := size
			if set.zstd {
				want = -1 // a zstd stream: its length is the server's choice
			}
			return size, bt.read(ctx, conn, names[i], want)
		}, func() {}, nil
	case ModeStall:
		h := sha256.New()
		var stamp [stampLen]byte
		stall := bt.stall
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.sizes[seq%int64(len(set.sizes))]
			stamp = set.stamp(uint64(seq))
			name := uploadName(bt.instance, uint64(seq), "blobs/"+set.digest(h, size, &stamp)+"/"+strconv.FormatInt(size, 10))
			return bt.stallUpload(ctx, conn, name, set.base, size, stall)
		}, func() {}, nil
	case ModeWrite, ModeWriteZstd:
		h := sha256.New()
		var stamp [stampLen]byte
		var frame []byte
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.sizes[seq%int64(len(set.sizes))]
			// seq is unique in the run and below 1<<63.
			stamp = set.stamp(uint64(seq))
			name := uploadName(bt.instance, uint64(seq), set.namePrefix()+set.digest(h, size, &stamp)+"/"+strconv.FormatInt(size, 10))
			if set.zstd {
				frame = stampFrame(frame[:0], &stamp, size)
				return size, bt.writeZstd(ctx, conn, name, set.zprefix[prefixLen(size)], frame)
			}
			return size, bt.write(ctx, conn, name, set.base, size, &stamp)
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown blobs mode %q", c.Mode)
}

// read reads a whole blob and checks its length, unless size is -1.
func (bt *blobTarget) read(ctx context.Context, conn *grpc.ClientConn, name string, size int64) error {
	// No context of its own: gRPC cancels the stream's when it finishes, and
	// every return below follows a finishing error or io.EOF.
	stream, err := conn.NewStream(ctx, &readDesc, methodRead)
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&bspb.ReadRequest{ResourceName: name}); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	var got int64
	var chunk grpcmem.ClientReadResponse
	for {
		err := stream.RecvMsg(&chunk)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		got += int64(chunk.Data.Len())
		chunk.Free()
	}
	if size >= 0 && got != size || got == 0 {
		return fmt.Errorf("read %s: got %d bytes, want %d", name, got, size)
	}
	return nil
}

// write uploads the blob base[:prefixLen(size)] + stamp under name, in
// messages of at most bt.chunk bytes (the stamp shares the last message with
// the end of the prefix, as one data field), and checks the committed size.
func (bt *blobTarget) write(ctx context.Context, conn *grpc.ClientConn, name string, base []byte, size int64, stamp *[stampLen]byte) error {
	plen := prefixLen(size)
	committed, err := bt.upload(ctx, conn, name, base[:plen], stamp[:size-plen])
	if err != nil {
		return err
	}
	if committed != size {
		return fmt.Errorf("write %s: committed %d bytes, want %d", name, committed, size)
	}
	return nil
}

// upload sends the bytes of head and then tail as one ByteStream Write to
// name, in messages of at most bt.chunk bytes that refer to them (no
// copy), and returns the committed size the server answers.
func (bt *blobTarget) upload(ctx context.Context, conn *grpc.ClientConn, name string, head, tail []byte) (int64, error) {
	stream, err := conn.NewStream(ctx, &writeDesc, methodWrite)
	if err != nil {
		return 0, err
	}
	hlen := int64(len(head))
	total := hlen + int64(len(tail))
	var data membuf.Slice // its backing array serves every message: Marshal empties it
	for off := int64(0); off < total; {
		end := min(total, off+int64(bt.chunk))
		// A new message per send: gRPC may hold the last one's header.
		msg := &grpcmem.WriteRequest{WriteOffset: off, FinishWrite: end == total, Data: data[:0]}
		if off == 0 {
			msg.ResourceName = name
		}
		if off < hlen {
			msg.Data = append(msg.Data, membuf.Wrap(head[off:min(end, hlen)]))
		}
		if end > hlen {
			msg.Data = append(msg.Data, membuf.Wrap(tail[max(off, hlen)-hlen:end-hlen]))
		}
		data = msg.Data
		off = end
		if err := grpcmem.SendWrite(stream, msg); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server has answered already; RecvMsg says how
			}
			return 0, err
		}
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	var resp bspb.WriteResponse
	if err := stream.RecvMsg(&resp); err != nil {
		return 0, err
	}
	return resp.CommittedSize, nil
}

// startProcess starts configuration name (ConfigServe or ConfigCeiling) as a
// process of its own, ConfigServe on a store in dir.
func (o *BlobsOptions) startProcess(ctx context.Context, name, dir string, storeSize int64, chunk int) (*serveprocess.Process, error) {
	var args []string
	switch name {
	case ConfigServe:
		args = append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--http-cache", "127.0.0.1:0", "--dir", dir,
			"--max-size", strconv.FormatInt(storeSize, 10), "--chunk-size", strconv.Itoa(chunk), "--log-level", "warn"},
			o.ServeFlags...)
	case ConfigCeiling:
		args = []string{"ceiling", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}
	default:
		return nil, fmt.Errorf("configuration %s does not run as a process", name)
	}
	return serveprocess.Start(ctx, o.Command(args...))
}

// metricsURL returns a server process's Prometheus endpoint, or "" if it
// serves no HTTP.
func metricsURL(p *serveprocess.Process) string {
	if p.HTTPAddr == "" {
		return ""
	}
	return "http://" + p.HTTPAddr + "/metrics"
}

// stallUpload starts uploading the blob base[:size] under name, sends its
// first message (at most bt.chunk bytes, not finishing it unless the blob is
// that short), holds the stream for stall, and abandons it. It returns the
// bytes sent.
func (bt *blobTarget) stallUpload(ctx context.Context, conn *grpc.ClientConn, name string, base []byte, size int64, stall time.Duration) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // abandons the upload
	stream, err := conn.NewStream(ctx, &writeDesc, methodWrite)
	if err != nil {
		return 0, err
	}
	n := min(size-1, int64(bt.chunk), prefixLen(size))
	msg := &grpcmem.WriteRequest{ResourceName: name, Data: membuf.Slice{membuf.Wrap(base[:n])}}
	if err := grpcmem.SendWrite(stream, msg); err != nil {
		return 0, err
	}
	t := time.NewTimer(stall)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return n, nil
}

// blobServer is a cas server in this process.
type blobServer struct {
	store     *disk.Store
	cas       *reapi.Server
	grpc      *grpc.Server
	addr      string
	completed atomic.Int64 // ByteStream Reads and Writes that succeeded
}

// startBlobServer starts a cas server of configuration config on a store in
// dir. ConfigMembufZeroCopy is wired for the zero-copy path
// (reapi.ServerOptions): pool for read chunks and for gRPC's buffers, and
// membuf's ByteStream codec. ConfigFreshSlice is plain chunk slices, grpc-go's
// default pool and proto codec; ConfigPrepared is the same with Read served
// by preparedRead.
func startBlobServer(dir string, storeSize int64, chunk int, config string, pool *membuf.Pool) (*blobServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	store, err := disk.OpenStore(dir, storeSize, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	opts := reapi.Options{ChunkSize: chunk}
	var serverOpts []grpc.ServerOption
	switch config {
	case ConfigMembufZeroCopy:
		opts.Pool = pool
		// grpcmem's codec, the pool for gRPC's reads, and the marker
		// that turns the handlers' zero-copy path on.
		serverOpts = append(serverOpts, reapi.ServerOptions(pool)...)
	case ConfigPrepared:
		serverOpts = append(serverOpts, grpc.ChainStreamInterceptor(newPreparedRead(store, chunk).intercept))
	}
	srv, err := reapi.NewServer(store, opts)
	if err != nil {
		store.Close()
		return nil, err
	}
	s := &blobServer{store: store, cas: srv}
	// count first, so that it sees the Reads preparedRead serves too.
	serverOpts = append([]grpc.ServerOption{grpc.ChainStreamInterceptor(s.count)}, serverOpts...)
	s.grpc = grpc.NewServer(serverOpts...)
	srv.Register(s.grpc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		return nil, err
	}
	s.addr = lis.Addr().String()
	go s.grpc.Serve(lis)
	return s, nil
}

// count counts the ByteStream Reads and Writes that complete without error.
func (s *blobServer) count(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	if err == nil && (info.FullMethod == methodRead || info.FullMethod == methodWrite) {
		s.completed.Add(1)
	}
	return err
}

func (s *blobServer) close() {
	s.grpc.Stop()
	s.cas.Close()
	s.store.Close()
}
