package disk

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

// checkTable checks that t holds exactly what model does.
func checkTable(t *testing.T, tab *recordTable, model map[tableKey]packedRecord) {
	t.Helper()
	if tab.len() != len(model) {
		t.Fatalf("table holds %d records, want %d", tab.len(), len(model))
	}
	seen := 0
	for i := range tableShards {
		for _, r := range tab.shardRecords(i, nil) {
			seen++
			want, ok := model[tableKey{r.hash, r.ac}]
			if !ok || want != r {
				t.Fatalf("shard %d holds %+v, want %+v (in the model: %v)", i, r, want, ok)
			}
		}
	}
	if seen != len(model) {
		t.Fatalf("walked %d records, want %d", seen, len(model))
	}
	for k, want := range model {
		got, ok := tab.get(&k.hash, k.ac)
		if !ok || got != want {
			t.Fatalf("get(%x, ac %v) = %+v, %v; want %+v", k.hash[:4], k.ac, got, ok, want)
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

// FuzzRecordTable runs a sequence of puts, deletes, sweeps and growths
// against a map: every record put is found with what was put last, no
// deleted or swept one is, and a walk sees each exactly once.
func FuzzRecordTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tab recordTable
		defer tab.free()
		model := map[tableKey]packedRecord{}
		dead := map[uint32]bool{}
		var cur sweepCursor
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			key := keyOf(arg&0x3f, op&0x10 != 0)
			ac := arg&0x40 != 0
			switch op % 4 {
			case 0, 1: // put, twice as often
				r := packedRecord{hash: key, ac: ac, seq: uint32(op >> 5), off: uint32(i), size: uint32(arg), crc: binary.LittleEndian.Uint32(key[4:])}
				_, had := model[tableKey{key, ac}]
				if isNew := tab.put(&r); isNew == had {
					t.Fatalf("put of %x: new %v, but the model had it: %v", key[:4], isNew, had)
				}
				model[tableKey{key, ac}] = r
			case 2: // delete
				_, had := model[tableKey{key, ac}]
				if got := tab.delete(&key, ac); got != had {
					t.Fatalf("delete of %x: %v, want %v", key[:4], got, had)
				}
				delete(model, tableKey{key, ac})
			case 3: // a segment goes; sweep some
				dead[uint32(arg>>5)] = true
				tab.sweep(&cur, int(arg&0x1f), func(seq uint32) bool { return !dead[seq] })
				// The sweep may have taken any record of a dead
				// segment: the model follows the table there.
				for k, r := range model {
					if dead[r.seq] {
						if _, ok := tab.get(&k.hash, k.ac); !ok {
							delete(model, k)
						}
					}
				}
			}
		}
		checkTable(t, &tab, model)
		// A whole pass takes every record of a dead segment.
		tab.sweep(&cur, 1<<20, func(seq uint32) bool { return !dead[seq] })
		for k, r := range model {
			if dead[r.seq] {
				delete(model, k)
			}
		}
		checkTable(t, &tab, model)
	})
}

// TestRecordTableGrowsPastMappedSize puts enough records for shards to
// move to mapped memory, deletes half, and checks the rest.
func TestRecordTableGrowsPastMappedSize(t *testing.T) {
	var tab recordTable
	defer tab.free()
	const n = 200_000 // 781 a shard: 48 KiB of slots at 80%, 64 KiB once grown
	model := map[tableKey]packedRecord{}
	for i := range n {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(i))
		r := packedRecord{hash: sha256.Sum256(b[:]), ac: i%3 == 0, seq: uint32(i % 7), off: uint32(i), size: uint32(i * 3), crc: uint32(i * 5), verified: i%2 == 0}
		tab.put(&r)
		model[tableKey{r.hash, r.ac}] = r
	}
	// Between growths a shard is 53% to 80% full.
	if per := float64(tab.memory()) / float64(tab.len()); per < recordLen*5/4 || per > recordLen*2 {
		t.Errorf("%.0f bytes of slots a record, want %d to %d", per, recordLen*5/4, recordLen*2)
	}
	for k := range model {
		if k.hash[1]%2 == 0 {
			tab.delete(&k.hash, k.ac)
			delete(model, k)
		}
	}
	checkTable(t, &tab, model)
}
