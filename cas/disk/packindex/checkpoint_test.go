package packindex_test

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// tableOf returns a table of n records spread over segments 0 to 3, every
// other one marked verified, of the four fuzzFunctions in turn (narrow and
// wide records).
func tableOf(t *testing.T, n int) *packindex.Table {
	t.Helper()
	tab := new(packindex.Table)
	t.Cleanup(tab.Free)
	for i := range n {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(i))
		fn := fuzzFunctions[i/4%4]
		sum := sha512.Sum512(b[:])
		tab.Put(&packindex.Record{Key: packindex.KeyOf(fn, sum[:fn.Size()], i%5 == 0), Verified: i%2 == 0, Seq: uint32(i % 4), Off: uint32(i), Size: uint32(i * 7), CRC: uint32(i * 13)})
	}
	return tab
}

// TestCheckpointV1: a checkpoint of the format before digest functions
// (written here byte by byte: magic "MBIDX\0\0\1", 256 blocks of 49-byte
// records, each a SHA-256 hash, flags, segment, offset, size and CRC) reads
// as SHA-256 records, and its records are found in a table under SHA-256
// and not under BLAKE3.
func TestCheckpointV1(t *testing.T) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	file := []byte("MBIDX\x00\x00\x01")
	file = binary.LittleEndian.AppendUint32(file, 1)
	file = binary.LittleEndian.AppendUint64(file, 5)
	file = binary.LittleEndian.AppendUint64(file, 4096)
	file = binary.LittleEndian.AppendUint32(file, crc32.Checksum(file, castagnoli))
	want := map[[32]byte]bool{}
	for i := range 256 {
		var block []byte
		n := 0
		if i == 0x2a || i == 0x80 {
			n = 2
		}
		block = binary.LittleEndian.AppendUint32(block, uint32(n))
		for j := range n {
			h := sha256.Sum256([]byte{byte(i), byte(j)})
			h[0] = byte(i)
			want[h] = true
			block = append(block, h[:]...)
			block = append(block, 1|byte(j)<<1) // used, and an action result for j 1
			block = binary.LittleEndian.AppendUint32(block, 5)
			block = binary.LittleEndian.AppendUint32(block, uint32(64*j))
			block = binary.LittleEndian.AppendUint32(block, 10)
			block = binary.LittleEndian.AppendUint32(block, 0xc0ffee)
		}
		file = append(file, binary.LittleEndian.AppendUint32(block, crc32.Checksum(block, castagnoli))...)
	}
	c, err := packindex.NewCheckpointReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if c.Segments[5] != 4096 {
		t.Fatalf("the checkpoint names %v; want segment 5 of 4096 bytes", c.Segments)
	}
	var tab packindex.Table
	defer tab.Free()
	for range packindex.Shards {
		_, recs, err := c.NextShard(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Fn != cas.SHA256 || !want[[32]byte(r.Hash[:32])] || r.Seq != 5 || r.Size != 10 || r.CRC != 0xc0ffee || r.AC != (r.Off == 64) {
				t.Fatalf("read %+v", r)
			}
			delete(want, [32]byte(r.Hash[:32]))
			tab.Put(&r)
		}
	}
	if len(want) != 0 || tab.Len() != 4 {
		t.Fatalf("%d records not read; the table holds %d, want 4", len(want), tab.Len())
	}
	h := sha256.Sum256([]byte{0x2a, 0})
	h[0] = 0x2a
	if _, ok := tab.Get(new(packindex.KeyOf(cas.SHA256, h[:], false))); !ok {
		t.Error("a record of the old checkpoint is not found under SHA-256")
	}
	if _, ok := tab.Get(new(packindex.KeyOf(cas.BLAKE3, h[:], false))); ok {
		t.Error("a record of the old checkpoint is found under BLAKE3")
	}
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
			want, ok := tab.Get(&r.Key)
			want.Verified = false
			if !ok || r != want || int(r.Hash[0]) != i%256 || (i >= 256) != (r.Fn.Size() > 32) {
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
