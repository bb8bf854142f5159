package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/packed/packedtest"
	"github.com/membuf/membuf/cas/internal/fanout"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/internal/await"
	"github.com/membuf/membuf/internal/miniotest"
)

// requestCountingBucket counts the requests that read a bucket: GETs of
// named objects (ReadRange), listings, and the per-object layout's HEADs
// and GETs.
type requestCountingBucket struct {
	*Backend
	gets atomic.Int64
}

func (c *requestCountingBucket) ReadRange(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	c.gets.Add(1)
	return c.Backend.ReadRange(ctx, name, off, n)
}

func (c *requestCountingBucket) ListAfter(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	c.gets.Add(1)
	return c.Backend.ListAfter(ctx, prefix, after, limit)
}

func (c *requestCountingBucket) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	c.gets.Add(int64(len(ks)))
	return c.Backend.Stat(ctx, ks, sizes)
}

func (c *requestCountingBucket) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	c.gets.Add(1)
	return c.Backend.Get(ctx, k, off)
}

// joinRecords is how many records TestMinIONodeJoinsABigBucket writes,
// 100 a pack: $MEMBUF_PACKS_JOIN_RECORDS, by default 30,000 (300 packs:
// without a snapshot, a start would read 300 indexes). The issue's
// bucket is 10,000,000 (100,000 packs; about 10 minutes to write here,
// and 1.5 GB of memory).
func joinRecords(t *testing.T) int {
	s := os.Getenv("MEMBUF_PACKS_JOIN_RECORDS")
	if s == "" {
		return 30_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 {
		t.Fatalf("MEMBUF_PACKS_JOIN_RECORDS=%q: want a number of records, at least 100", s)
	}
	return n
}

// joinBlob is record i's bytes: 16, distinct.
func joinBlob(i int) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], uint64(i))
	binary.LittleEndian.PutUint64(b[8:], ^uint64(i))
	return b[:]
}

func joinUpload(i int) tier.Upload {
	data := joinBlob(i)
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	return tier.Upload{Key: tier.BlobKey(cas.Digest{Function: cas.SHA256, Hash: h, Size: int64(len(data))}), Body: bytes.NewReader(data), Size: int64(len(data)), SHA256: h}
}

// A node that joins a bucket of many records in many packs (a writer
// node's Puts, then its snapshot) knows every record once its first
// listing is done, with at most 200 requests that read the bucket. The
// time from New to then is logged ("joined in"), the figure the target
// of 10 s at 10M records is about: measured on a quiet machine with
//
//	MEMBUF_PACKS_JOIN_RECORDS=10000000 go test -run TestMinIONodeJoinsABigBucket -v -timeout 60m ./cas/backend/s3/
func TestMinIONodeJoinsABigBucket(t *testing.T) {
	records := joinRecords(t)
	packs := (records + 99) / 100
	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	m := miniotest.Start(t)
	writer, _ := newPackedMinIOConfig(t, m, "join/", packed.Config{SnapshotEvery: -1, IndexedOnly: true})
	ctx := t.Context()
	var failed atomic.Int64
	var firstErr sync.Once
	fanout.Each(packs, 16, func(p int) {
		var ups []tier.Upload
		for i := p * 100; i < min(records, (p+1)*100); i++ {
			ups = append(ups, joinUpload(i))
		}
		for _, err := range writer.Put(ctx, ups) {
			if err != nil {
				failed.Add(1)
				firstErr.Do(func() { t.Errorf("Put: %v", err) })
			}
		}
	})
	if failed.Load() > 0 {
		t.Fatalf("%d records failed to go up", failed.Load())
	}
	if err := writer.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := writer.WriteSnapshot(ctx); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	if st := writer.Stats(); st.Records != int64(records) || st.Packs != int64(packs) {
		t.Fatalf("the writer knows %d records in %d packs; want %d in %d", st.Records, st.Packs, records, packs)
	}
	writer.Close() // its table's memory back before the joining node's

	loc, err := ParseURL(m.URL("join/"))
	if err != nil {
		t.Fatal(err)
	}
	bk, err := New(context.Background(), Config{Location: loc, Concurrency: 16, RequestTimeout: cfgTimeout})
	if err != nil {
		t.Fatal(err)
	}
	c := &requestCountingBucket{Backend: bk}
	start := time.Now()
	joiner := packedtest.New(t, packed.Config{Objects: c, Bucket: c, SnapshotEvery: -1, IndexedOnly: true})
	if !await.Within(30*time.Minute, func() bool { return joiner.Stats().Refreshes > 0 }) {
		t.Fatal("the joining node's first listing did not end")
	}
	joined, gets := time.Since(start), c.gets.Load()
	t.Logf("joined in %v with %d requests: %d records in %d packs", joined, gets, records, packs)
	st := joiner.Stats()
	if st.Records != int64(records) || st.SnapshotsRead != 1 || st.IndexesRead != 0 {
		t.Errorf("Stats %+v; want %d records, from a snapshot, no index read", st, records)
	}
	if gets > 200 {
		t.Errorf("%d requests read the bucket while the node joined; want at most 200", gets)
	}
	for _, i := range []int{0, records / 2, records - 1} {
		u := joinUpload(i)
		obj, err := joiner.Get(ctx, u.Key, 0)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		got, err := io.ReadAll(obj.Body)
		obj.Body.Close()
		if err != nil || !bytes.Equal(got, joinBlob(i)) {
			t.Fatalf("record %d read %x, %v; want %x", i, got, err, joinBlob(i))
		}
	}
}
