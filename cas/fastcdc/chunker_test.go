package fastcdc

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// The gear table generated from MD5 is the paper's: its first and last
// entries as the reference implementations print them.
func TestGearIsThePapers(t *testing.T) {
	if gear[0] != 0x3b5d3c7d207e37dc || gear[1] != 0x784d68ba91123086 || gear[255] != 0xaabd2b2a451504e1 {
		t.Fatalf("gear[0], [1], [255] = %#x, %#x, %#x", gear[0], gear[1], gear[255])
	}
}

// pcgInput is 3 MiB from PCG(1, 2), eight bytes at a time, little endian.
func pcgInput() []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 3<<20)
	for i := 0; i < len(data); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	return data
}

// chunkSizes chunks data, written in pieces of step bytes, and returns the
// chunks' sizes.
func chunkSizes(t testing.TB, p Params, data []byte, step int) []int {
	t.Helper()
	var sizes []int
	c, err := NewChunker(p, func(chunk []byte) error {
		sizes = append(sizes, len(chunk))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(data); i += step {
		if _, err := c.Write(data[i:min(i+step, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return sizes
}

// The cuts of the REAPI's Go reference implementation
// (github.com/buildbuddy-io/fastcdc2020 at 2f01aaf, NewChunker(r, 64 KiB,
// WithSeed(s))) on pcgInput: taken from it, not from this package. (This
// package also passes remote-apis' fastcdc2020_test_vectors.txt, whose
// input image is not kept here.)
var referenceSizes = map[uint64][]int{
	0: {71594, 66794, 88578, 66477, 97879, 56682, 84403, 78408, 84199, 66617, 69096, 82831, 69802, 96367, 69083, 107804, 62376, 18353, 69726,
		118338, 80369, 145720, 73351, 78395, 75115, 81212, 77416, 91484, 93925, 74052, 76452, 65787, 83372, 66557, 34150, 79648, 79930, 66189, 97327, 66631, 33239},
	666: {77290, 77149, 67465, 30901, 93472, 45559, 43204, 56932, 48040, 68698, 33655, 79035, 81262, 67397, 69946, 68533, 86370, 52879, 38123,
		102517, 87472, 81369, 16479, 78957, 66199, 83545, 69138, 72819, 33761, 65767, 88937, 78627, 33875, 34120, 87836, 66308, 94054, 96022, 81180,
		69034, 23508, 98680, 38796, 72866, 69467, 115984, 26939, 25562},
}

func TestCutsMatchTheReference(t *testing.T) {
	data := pcgInput()
	for seed, want := range referenceSizes {
		for _, step := range []int{1 << 20, 64 << 10, 4093} {
			if got := chunkSizes(t, REAPI(64<<10, uint32(seed)), data, step); !slices.Equal(got, want) {
				t.Errorf("seed %d, writes of %d: %v\nwant %v", seed, step, got, want)
			}
		}
	}
}

// After an edit in the middle, the chunks resynchronise: those wholly
// after the edit's chunk are the same as before, and every chunk is within
// the minimum and maximum but the last.
func TestChunksResynchroniseAfterAnEdit(t *testing.T) {
	p := REAPI(64<<10, 0)
	data := pcgInput()
	edited := bytes.Clone(data)
	copy(edited[1<<20:], bytes.Repeat([]byte("edit"), 10000)) // 40,000 bytes at 1 MiB
	a, b := chunkSizes(t, p, data, 1<<16), chunkSizes(t, p, edited, 1<<16)
	for i, n := range b[:len(b)-1] {
		if n < p.MinSize || n > p.MaxSize {
			t.Fatalf("chunk %d is %d bytes, outside [%d, %d]", i, n, p.MinSize, p.MaxSize)
		}
	}
	// Compare the chunks by where they end, from the end of the stream.
	ends := func(sizes []int) map[int]bool {
		m, off := map[int]bool{}, 0
		for _, n := range sizes {
			off += n
			m[off] = true
		}
		return m
	}
	ea, eb := ends(a), ends(b)
	shared, after := 0, 0
	for off := range ea {
		if off > 1<<20+40000+p.MaxSize {
			after++
			if eb[off] {
				shared++
			}
		}
	}
	if shared != after || after == 0 {
		t.Fatalf("%d of the %d cut points well after the edit survive it; want all", shared, after)
	}
}

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{{64, 100, 400, 0}, {64, 512, 256, 0}, {16, 1024, 4096, 0}, {1024, 1024, 4096, 0}, REAPI(16<<20, 0)} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := REAPI(DefaultAvgSize, 0).Validate(); err != nil {
		t.Fatal(err)
	}
}

// FuzzChunkerWriteSizes: how a stream is written never moves a cut.
func FuzzChunkerWriteSizes(f *testing.F) {
	f.Add([]byte("seed"), uint16(1), uint16(7))
	f.Add(bytes.Repeat([]byte{0}, 9000), uint16(4096), uint16(1))
	f.Add(pcgInput()[:20000], uint16(333), uint16(8192))
	p := Params{MinSize: 256, AvgSize: 1024, MaxSize: 4096}
	f.Fuzz(func(t *testing.T, data []byte, s1, s2 uint16) {
		a := chunkSizes(t, p, data, int(s1)+1)
		b := chunkSizes(t, p, data, int(s2)+1)
		total := 0
		for _, n := range a {
			total += n
		}
		if !slices.Equal(a, b) || total != len(data) {
			t.Fatalf("writes of %d: %v; of %d: %v; %d bytes", s1+1, a, s2+1, b, len(data))
		}
	})
}
