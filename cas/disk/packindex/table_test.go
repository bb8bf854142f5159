package packindex_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/membuf/membuf/cas/disk/packindex"
)

// checkTable checks that t holds exactly what model does.
func checkTable(t *testing.T, tab *packindex.Table, model map[packindex.Key]packindex.Record) {
	t.Helper()
	if tab.Len() != len(model) {
		t.Fatalf("table holds %d records, want %d", tab.Len(), len(model))
	}
	seen := 0
	for i := range packindex.Shards {
		for _, r := range tab.ShardRecords(i, nil) {
			seen++
			want, ok := model[packindex.Key{Hash: r.Hash, AC: r.AC}]
			if !ok || want != r {
				t.Fatalf("shard %d holds %+v, want %+v (in the model: %v)", i, r, want, ok)
			}
		}
	}
	if seen != len(model) {
		t.Fatalf("walked %d records, want %d", seen, len(model))
	}
	for k, want := range model {
		got, ok := tab.Get(&k.Hash, k.AC)
		if !ok || got != want {
			t.Fatalf("get(%x, ac %v) = %+v, %v; want %+v", k.Hash[:4], k.AC, got, ok, want)
		}
	}
}

// keyOf makes key i of a small key space whose hashes share their first
// byte (one shard, so that probing, wrapping and shifting back are
// exercised) unless spread.
func keyOf(i byte, spread bool) [32]byte {
	h := sha256.Sum256([]byte{i})
	if !spread {
		h[0] = 7
	}
	return h
}

// FuzzTable runs a sequence of puts, deletes, sweeps and growths
// against a map: every record put is found with what was put last, no
// deleted or swept one is, and a walk sees each exactly once.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tab packindex.Table
		defer tab.Free()
		model := map[packindex.Key]packindex.Record{}
		dead := map[uint32]bool{}
		var cur packindex.SweepCursor
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			key := keyOf(arg&0x3f, op&0x10 != 0)
			ac := arg&0x40 != 0
			switch op % 4 {
			case 0, 1: // put, twice as often
				r := packindex.Record{Hash: key, AC: ac, Seq: uint32(op >> 5), Off: uint32(i), Size: uint32(arg), CRC: binary.LittleEndian.Uint32(key[4:])}
				_, had := model[packindex.Key{Hash: key, AC: ac}]
				if isNew := tab.Put(&r); isNew == had {
					t.Fatalf("put of %x: new %v, but the model had it: %v", key[:4], isNew, had)
				}
				model[packindex.Key{Hash: key, AC: ac}] = r
			case 2: // delete
				_, had := model[packindex.Key{Hash: key, AC: ac}]
				if got := tab.Delete(&key, ac); got != had {
					t.Fatalf("delete of %x: %v, want %v", key[:4], got, had)
				}
				delete(model, packindex.Key{Hash: key, AC: ac})
			case 3: // a segment goes; sweep some
				dead[uint32(arg>>5)] = true
				tab.Sweep(&cur, int(arg&0x1f), func(seq uint32) bool { return !dead[seq] })
				// The sweep may have taken any record of a dead
				// segment: the model follows the table there.
				for k, r := range model {
					if dead[r.Seq] {
						if _, ok := tab.Get(&k.Hash, k.AC); !ok {
							delete(model, k)
						}
					}
				}
			}
		}
		checkTable(t, &tab, model)
		// A whole pass takes every record of a dead segment.
		tab.Sweep(&cur, 1<<20, func(seq uint32) bool { return !dead[seq] })
		for k, r := range model {
			if dead[r.Seq] {
				delete(model, k)
			}
		}
		checkTable(t, &tab, model)
	})
}

// TestTableGrowsPastMappedSize puts enough records for shards to
// move to mapped memory, deletes half, and checks the rest.
func TestTableGrowsPastMappedSize(t *testing.T) {
	var tab packindex.Table
	defer tab.Free()
	const n = 200_000 // 781 a shard: 48 KiB of slots at 80%, 64 KiB once grown
	model := map[packindex.Key]packindex.Record{}
	for i := range n {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(i))
		r := packindex.Record{Hash: sha256.Sum256(b[:]), AC: i%3 == 0, Seq: uint32(i % 7), Off: uint32(i), Size: uint32(i * 3), CRC: uint32(i * 5), Verified: i%2 == 0}
		tab.Put(&r)
		model[packindex.Key{Hash: r.Hash, AC: r.AC}] = r
	}
	// Between growths a shard is 53% to 80% full.
	if per := float64(tab.Memory()) / float64(tab.Len()); per < packindex.RecordLen*5/4 || per > packindex.RecordLen*2 {
		t.Errorf("%.0f bytes of slots a record, want %d to %d", per, packindex.RecordLen*5/4, packindex.RecordLen*2)
	}
	for k := range model {
		if k.Hash[1]%2 == 0 {
			tab.Delete(&k.Hash, k.AC)
			delete(model, k)
		}
	}
	checkTable(t, &tab, model)
}
