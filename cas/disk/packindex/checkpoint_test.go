package packindex_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// tableOf returns a table of n records spread over segments 0 to 3, every
// other one marked verified.
func tableOf(t *testing.T, n int) *packindex.Table {
	t.Helper()
	tab := new(packindex.Table)
	t.Cleanup(tab.Free)
	for i := range n {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(i))
		tab.Put(&packindex.Record{Hash: sha256.Sum256(b[:]), AC: i%5 == 0, Verified: i%2 == 0, Seq: uint32(i % 4), Off: uint32(i), Size: uint32(i * 7), CRC: uint32(i * 13)})
	}
	return tab
}

// TestCheckpointRoundTrip: a checkpoint holds the segments it names and
// exactly the records of those segments, without their Verified flag.
func TestCheckpointRoundTrip(t *testing.T) {
	tab := tableOf(t, 5000)
	segs := []packindex.Segment{{Seq: 1, Size: 1 << 20}, {Seq: 3, Size: 12345}}
	var file bytes.Buffer
	if err := packindex.WriteCheckpoint(&file, segs, tab.ShardRecords); err != nil {
		t.Fatal(err)
	}
	c, err := packindex.NewCheckpointReader(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Segments) != 2 || c.Segments[1] != 1<<20 || c.Segments[3] != 12345 {
		t.Fatalf("the checkpoint names %v; want segments 1 and 3 with their sizes", c.Segments)
	}
	got := 0
	for range packindex.Shards {
		i, recs, err := c.NextShard(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want, ok := tab.Get(&r.Hash, r.AC)
			want.Verified = false
			if !ok || r != want || int(r.Hash[0]) != i {
				t.Fatalf("shard %d holds %+v; the table has %+v (%v)", i, r, want, ok)
			}
			if r.Seq != 1 && r.Seq != 3 {
				t.Fatalf("the checkpoint holds a record of segment %d, which it does not name", r.Seq)
			}
			got++
		}
	}
	if got != 2500 {
		t.Fatalf("the checkpoint holds %d records; want the 2500 of segments 1 and 3", got)
	}
	if _, _, err := c.NextShard(nil); err == nil {
		t.Fatal("a shard past the last read without an error")
	}
}

// TestCheckpointDamage: a checkpoint cut short or with a byte changed
// fails where it is damaged, with an error, never a panic.
func TestCheckpointDamage(t *testing.T) {
	tab := tableOf(t, 3000)
	var file bytes.Buffer
	if err := packindex.WriteCheckpoint(&file, []packindex.Segment{{Seq: 0, Size: 1}, {Seq: 2, Size: 2}}, tab.ShardRecords); err != nil {
		t.Fatal(err)
	}
	good := file.Bytes()
	readAll := func(b []byte) error {
		c, err := packindex.NewCheckpointReader(bytes.NewReader(b))
		if err != nil {
			return err
		}
		for range packindex.Shards {
			if _, _, err := c.NextShard(nil); err != nil {
				return err
			}
		}
		return nil
	}
	if err := readAll(good); err != nil {
		t.Fatalf("the checkpoint as written: %v", err)
	}
	for _, at := range []int{0, 9, 20, 40, 100, len(good) / 2, len(good) - 1} {
		bad := bytes.Clone(good)
		bad[at] ^= 0x40
		if err := readAll(bad); err == nil {
			t.Errorf("a checkpoint with byte %d changed reads without an error", at)
		}
	}
	for _, n := range []int{0, 5, 12, 60, len(good) / 3, len(good) - 1} {
		if err := readAll(good[:n]); err == nil {
			t.Errorf("a checkpoint cut to %d bytes reads without an error", n)
		}
	}
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(huge[8:], 1<<30)
	if err := readAll(huge); err == nil {
		t.Error("a checkpoint naming 2^30 segments reads without an error")
	}
}

// TestSaveCheckpoint: a checkpoint saved to a path opens from it whole; a
// path with none is no checkpoint and no error.
func TestSaveCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "index.ckpt")
	if c, err := packindex.OpenCheckpoint(vfs.Default, path); c != nil || err != nil {
		t.Fatalf("OpenCheckpoint of no file: %v, %v; want nil, nil", c, err)
	}
	tab := tableOf(t, 1000)
	if err := packindex.SaveCheckpoint(vfs.Default, path, dir, []packindex.Segment{{Seq: 2, Size: 9}}, tab.ShardRecords); err != nil {
		t.Fatal(err)
	}
	c, err := packindex.OpenCheckpoint(vfs.Default, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for range packindex.Shards {
		_, recs, err := c.NextShard(nil)
		if err != nil {
			t.Fatal(err)
		}
		n += len(recs)
	}
	if c.Segments[2] != 9 || n != 250 {
		t.Fatalf("the saved checkpoint names %v and holds %d records; want segment 2 and its 250", c.Segments, n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory; want the checkpoint alone", len(ents))
	}
}
