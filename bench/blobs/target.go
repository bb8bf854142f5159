package blobs

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
)

// blobTarget is one configuration of the blobs workload: a client and, in
// process, the server it talks to.
type blobTarget struct {
	measure.Target
	client   *blobclient.Client
	http     *http.Client // for the HTTP modes
	httpBase string       // http://host:port of the server's HTTP cache; "": none
	stall    time.Duration
	sets     map[report.Case]*blobclient.Set
}

func newBlobTarget(name string, client *blobclient.Client, s *blobServer, sets map[report.Case]*blobclient.Set) *blobTarget {
	bt := &blobTarget{client: client, http: newHTTPClient(), sets: sets}
	bt.Target = measure.Target{Name: name, Worker: bt.worker, MeasureGC: true}
	if s != nil {
		bt.ServerOps = s.completed.Load
	}
	return bt
}

func (bt *blobTarget) worker(ctx context.Context, c report.Case, w int) (measure.Op, func(), error) {
	set := bt.sets[c]
	if set == nil {
		return nil, nil, fmt.Errorf("no blobs for case %s", c)
	}
	// Worker w of a case of C streams uses connection w mod n: min(C, n)
	// connections, each carrying an equal share of the streams.
	conn := bt.client.Conns[w%len(bt.client.Conns)]
	if httpMode(c.Mode) {
		return bt.httpWorker(c, set, w)
	}
	switch c.Mode {
	case ModeRead, ModeReadZstd:
		names := make([]string, len(set.Reads))
		for i, ref := range set.Reads {
			names[i] = blobclient.WithInstance(bt.client.Instance, ref.DigestName)
		}
		// Workers start at different blobs, so that they do not all read
		// the same one at once.
		start := int64(w) * 7
		return func(ctx context.Context, seq int64) (int64, error) {
			i := (start + seq) % int64(len(names))
			size := set.Reads[i].Size
			want := size
			if set.Zstd {
				want = -1 // a zstd stream: its length is the server's choice
			}
			return size, bt.client.Read(ctx, conn, names[i], want)
		}, func() {}, nil
	case ModeStall:
		h := set.NewHash()
		var stamp [blobclient.StampLen]byte
		stall := bt.stall
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.Sizes[seq%int64(len(set.Sizes))]
			stamp = set.Stamp(uint64(seq))
			name := blobclient.UploadName(bt.client.Instance, uint64(seq), set.NamePrefix()+set.Digest(h, size, &stamp)+"/"+strconv.FormatInt(size, 10))
			return bt.client.StallUpload(ctx, conn, name, set.Base, size, stall)
		}, func() {}, nil
	case ModeBatchWrite:
		return bt.batchWorker(set, w)
	case ModeWrite, ModeWriteZstd:
		h := set.NewHash()
		var stamp [blobclient.StampLen]byte
		var frame []byte
		return func(ctx context.Context, seq int64) (int64, error) {
			size := set.Sizes[seq%int64(len(set.Sizes))]
			// seq is unique in the run and below 1<<63.
			stamp = set.Stamp(uint64(seq))
			name := blobclient.UploadName(bt.client.Instance, uint64(seq), set.NamePrefix()+set.Digest(h, size, &stamp)+"/"+strconv.FormatInt(size, 10))
			if set.Zstd {
				frame = blobclient.StampFrame(frame[:0], &stamp, size)
				return size, bt.client.WriteZstd(ctx, conn, name, set.ZPrefix[blobclient.PrefixLen(size)], frame)
			}
			return size, bt.client.Write(ctx, conn, name, set.Base, size, &stamp)
		}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown blobs mode %q", c.Mode)
}
