package bench

import (
	"context"
	"flag"
	"strings"
	"time"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/fill"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
)

func fillFlags() (*flag.FlagSet, *benchCommon, func(context.Context, *benchCommon) (*report.Report, error)) {
	fs := newFlagSet("bench fill", "[flags]",
		"Write -n distinct blobs of --size over --streams ByteStream streams into a fresh `membuf serve`\n"+
			"started on a store of its own (--serve-flag passes it flags), then stop it gracefully and\n"+
			"start it again on the same store. Reports the fill's blobs/s, overall and per tenth (a\n"+
			"falling rate is a store that slows as it grows), the server's peak RSS during the fill and\n"+
			"the RSS per blob (peak less the empty server's, over -n), the restart's time to its listen\n"+
			"line and to its first correct FindMissingBlobs answer, its RSS then, and FindMissingBlobs\n"+
			"latency (p50, p99) over --sample of the blobs, in batches of --batch, before and after the\n"+
			"restart. Every FindMissingBlobs answer is checked: a blob written and reported missing (or\n"+
			"one never written reported present) fails the run. The store is removed after, unless --keep.\n"+
			"With --addr, fills that server instead (no restart; its RSS and CPU with --server-pid).\n"+
			"A large -n takes longer than the default --timeout (10m): raise it.\n"+
			"Sizes take a suffix: K, M, G (powers of 1024) or KB, MB, GB.")
	common := &benchCommon{}
	common.register(fs, time.Second)
	o := fill.Options{Blobs: 100_000, Size: 2 << 10, Streams: 64, Seed: 1}
	var size, chunk, storeSize int64 = o.Size, 64 << 10, 0
	fs.Int64Var(&o.Blobs, "n", o.Blobs, "how many blobs to write")
	fs.Var(sizeFlag(&size), "size", "`size` of each blob (at least 16 bytes: each ends in a unique 16-byte stamp)")
	fs.IntVar(&o.Streams, "streams", o.Streams, "ByteStream uploads in flight at once")
	fs.IntVar(&o.Connections, "connections", 0, "client `connections` the streams are spread over (0: min(--streams, 4))")
	fs.StringVar(&o.Addr, "addr", "", "`host:port` of a running server to fill instead of starting one (loopback only; not restarted)")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "with --addr: process `id` of that server, to report its CPU time and RSS from /proc")
	fs.Func("serve-flag", "a `flag` for the started membuf serve, e.g. --serve-flag '--pack-sync 0' (repeatable; split at spaces)", func(s string) error {
		o.ServeFlags = append(o.ServeFlags, strings.Fields(s)...)
		return nil
	})
	fs.StringVar(&o.Dir, "dir", "", "`directory` in which the started server's store gets a directory of its own (default the system's temporary one)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the started server's store after the run (its path is in the settings)")
	fs.Var(sizeFlag(&storeSize), "store-size", "`size` bound of the started server's store (default twice the blobs and 1GiB more: nothing evicted)")
	fs.IntVar(&o.Sample, "sample", fill.DefaultSample, "how many of the blobs written FindMissingBlobs asks about, spread over the fill")
	fs.IntVar(&o.Batch, "batch", fill.DefaultBatch, "present digests per FindMissingBlobs call (each call also carries one never written)")
	fs.StringVar(&o.Instance, "instance", "", "REAPI instance `name` of every request")
	fs.Var(sizeFlag(&chunk), "chunk-size", "`size` of each ByteStream WriteRequest")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed for the blobs' random base")
	return fs, common, func(ctx context.Context, c *benchCommon) (*report.Report, error) {
		var bad []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "duration", "count", "rounds", "concurrency", "plot":
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			return nil, usageError("bench fill writes -n blobs over --streams once: %s does not apply", strings.Join(bad, ", "))
		}
		switch {
		case o.Blobs < fill.MinBlobs:
			return nil, usageError("-n must be at least %d (one blob per tenth of the fill)", fill.MinBlobs)
		case size < fill.MinSize || size > fill.MaxSize:
			return nil, usageError("--size %s: want 16 bytes to 1GiB", formatSize(size))
		case o.Streams < 1 || o.Streams > measure.MaxStreams:
			return nil, usageError("--streams must be between 1 and %d", measure.MaxStreams)
		case o.Connections < 0 || o.Connections > fill.MaxConnections:
			return nil, usageError("--connections must be between 1 and %d (or 0)", fill.MaxConnections)
		case chunk < 1 || chunk > blobclient.MaxChunkSize:
			return nil, usageError("--chunk-size must be between 1 byte and 2MiB")
		case o.Sample < 1 || o.Batch < 1:
			return nil, usageError("--sample and --batch must be at least 1")
		case o.ServerPID < 0:
			return nil, usageError("--server-pid must be a process id")
		case storeSize < 0:
			return nil, usageError("--store-size must not be negative")
		}
		if o.Addr != "" {
			if err := checkLoopback(o.Addr); err != nil {
				return nil, err
			}
			if len(o.ServeFlags) > 0 || o.Dir != "" || o.Keep || storeSize != 0 {
				return nil, usageError("--serve-flag, --dir, --keep and --store-size are for the server bench fill starts, not one at --addr")
			}
		} else if o.ServerPID != 0 {
			return nil, usageError("--server-pid describes the server at --addr")
		}
		o.Size, o.ChunkSize, o.StoreSize = size, int(chunk), storeSize
		o.Command = selfCommand
		o.Progress = c.progress
		return fill.Fill(ctx, o)
	}
}
