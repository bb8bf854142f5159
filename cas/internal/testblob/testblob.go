// Package testblob makes the blob contents the cas packages' tests store
// and read back (deterministic for a seed, so a failure reproduces), and
// compresses and decompresses them as a client would.
package testblob

import (
	"testing"

	"bytes"
	"math/rand/v2"

	"github.com/klauspost/compress/zstd"
)

// Pattern returns n bytes of a simple pattern, different for each seed. It
// repeats every 256 bytes, so every chunk of it is alike: use Random where
// a chunk must differ from the others.
func Pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// Random returns n pseudo-random bytes, different for each seed and from
// chunk to chunk (so that a chunk whose memory went on to hold another
// shows it); zstd does not compress them.
func Random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// Text returns n bytes of text-like data that zstd compresses about
// threefold, different for each seed.
func Text(n int, seed byte) []byte {
	words := []string{"func", "return", "buffer", "pool", "error", "nil", "if", "for", "range", "the", "bytes", "len", "chunk", "frame"}
	var b bytes.Buffer
	x := uint32(seed) + 1
	for b.Len() < n {
		x = x*1664525 + 1013904223
		b.WriteString(words[x>>16%uint32(len(words))])
		if x&0x700 == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
		if x&0xf000 == 0 {
			b.WriteString(string(rune('a' + x>>24%26)))
		}
	}
	return b.Bytes()[:n]
}

// Compress compresses data in one go, as the REAPI SDK does for blobs in
// memory (one frame; single-segment below the encoder's window).
func Compress(data []byte) []byte {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	return enc.EncodeAll(data, nil)
}

// Decompress decompresses a zstd stream with klauspost's decoder, apart from
// any store's pool: what a client does.
func Decompress(t testing.TB, stream []byte) []byte {
	t.Helper()
	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.DecodeAll(stream, nil)
	if err != nil {
		t.Fatalf("decompressing %d bytes: %v", len(stream), err)
	}
	return out
}

// CompressStream compresses data with klauspost's stream encoder and the given
// window, as clients do.
func CompressStream(t testing.TB, data []byte, window int) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := zstd.NewWriter(&out, zstd.WithWindowSize(window), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
