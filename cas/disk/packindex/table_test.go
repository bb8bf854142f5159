package packindex_test

import (
	"crypto/sha512"
	"encoding/binary"
	"testing"

	"github.com/membuf/membuf/cas"
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
			want, ok := model[r.Key]
			if !ok || want != r {
				t.Fatalf("shard %d holds %+v, want %+v (in the model: %v)", i, r, want, ok)
			}
		}
	}
	if seen != len(model) {
		t.Fatalf("walked %d records, want %d", seen, len(model))
	}
	for k, want := range model {
		got, ok := tab.Get(&k)
		if !ok || got != want {
			t.Fatalf("get(%s %x, ac %v) = %+v, %v; want %+v", k.Fn, k.Hash[:4], k.AC, got, ok, want)
		}
	}
}

// fuzzFunctions are the digest functions FuzzTable keys records by: SHA-256
// and BLAKE3 keys of the same hash are different keys in the same shards,
// SHA-1's narrower and SHA-512's in the wide shards.
var fuzzFunctions = [4]cas.Function{cas.SHA256, cas.BLAKE3, cas.SHA1, cas.SHA512}

// keyOf makes key i of function fn of a small key space whose hashes share
// their first byte (one shard, so that probing, wrapping and shifting back
// are exercised) unless spread. Keys of one i share their hash's first
// bytes whatever their function.
func keyOf(i byte, spread bool, fn cas.Function, ac bool) packindex.Key {
	h := sha512.Sum512([]byte{i})
	if !spread {
		h[0] = 7
	}
	return packindex.KeyOf(fn, h[:fn.Size()], ac)
}

// FuzzTable runs a sequence of puts, deletes, sweeps and growths
// against a map: every record put is found with what was put last, no
// deleted or swept one is, and a walk sees each exactly once.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	// The same hash under each function, put, then deleted under one.
	f.Add([]byte{0, 9, 4, 9, 8, 9, 12, 9, 6, 9, 1, 9, 5, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tab packindex.Table
		defer tab.Free()
		model := map[packindex.Key]packindex.Record{}
		dead := map[uint32]bool{}
		var cur packindex.SweepCursor
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			key := keyOf(arg&0x3f, op&0x10 != 0, fuzzFunctions[op>>2&3], arg&0x40 != 0)
			switch op % 4 {
			case 0, 1: // put, twice as often
				r := packindex.Record{Key: key, Seq: uint32(op >> 5), Off: uint32(i), Size: uint32(arg), CRC: binary.LittleEndian.Uint32(key.Hash[4:])}
				_, had := model[key]
				if isNew := tab.Put(&r); isNew == had {
					t.Fatalf("put of %s %x: new %v, but the model had it: %v", key.Fn, key.Hash[:4], isNew, had)
				}
				model[key] = r
			case 2: // delete
				_, had := model[key]
				if got := tab.Delete(&key); got != had {
					t.Fatalf("delete of %s %x: %v, want %v", key.Fn, key.Hash[:4], got, had)
				}
				delete(model, key)
			case 3: // a segment goes; sweep some
				dead[uint32(arg>>5)] = true
				tab.Sweep(&cur, int(arg&0x1f), func(seq uint32) bool { return !dead[seq] })
				// The sweep may have taken any record of a dead
				// segment: the model follows the table there.
				for k, r := range model {
					if dead[r.Seq] {
						if _, ok := tab.Get(&k); !ok {
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

// TestTableGrowsPastMappedSize puts enough records of one function for
// shards to move to mapped memory, deletes half, and checks the rest; a
// SHA-256 record takes a narrow record's bytes, a SHA-512 one a wide one's.
func TestTableGrowsPastMappedSize(t *testing.T) {
	for _, c := range []struct {
		fn     cas.Function
		recLen int
	}{{cas.SHA256, packindex.NarrowRecordLen}, {cas.SHA512, packindex.WideRecordLen}} {
		var tab packindex.Table
		defer tab.Free()
		const n = 200_000 // 781 a shard: 48 KiB of narrow slots at 80%, 64 KiB once grown
		model := map[packindex.Key]packindex.Record{}
		for i := range n {
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], uint32(i))
			sum := sha512.Sum512(b[:])
			r := packindex.Record{Key: packindex.KeyOf(c.fn, sum[:c.fn.Size()], i%3 == 0), Seq: uint32(i % 7), Off: uint32(i), Size: uint32(i * 3), CRC: uint32(i * 5), Verified: i%2 == 0}
			tab.Put(&r)
			model[r.Key] = r
		}
		// Between growths a shard is 53% to 80% full.
		if per := float64(tab.Memory()) / float64(tab.Len()); per < float64(c.recLen)*5/4 || per > float64(c.recLen)*2 {
			t.Errorf("%s: %.0f bytes of slots a record, want %d to %d", c.fn, per, c.recLen*5/4, c.recLen*2)
		}
		for k := range model {
			if k.Hash[1]%2 == 0 {
				tab.Delete(&k)
				delete(model, k)
			}
		}
		checkTable(t, &tab, model)
	}
}
