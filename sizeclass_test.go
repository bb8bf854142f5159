package membuf

import (
	"sort"
	"testing"
)

// modelClasses lists the class sizes from their definition, without the
// bit arithmetic: for each doubling [2^e, 2^(e+1)) from minSize, the k sizes
// 2^e + j*2^e/k, then maxSize itself.
func modelClasses(k, minSize, maxSize int) []int {
	var sizes []int
	for p := minSize; p < maxSize; p *= 2 {
		for j := range k {
			sizes = append(sizes, p+j*(p/k))
		}
	}
	return append(sizes, maxSize)
}

func checkTable(t *testing.T, tab *classTable, sizes []int, n int) {
	shift, minSize, maxSize := tab.shift, tab.minSize, tab.maxSize
	if tab.n != len(sizes) {
		t.Fatalf("k=%d: %d classes, model has %d", 1<<shift, tab.n, len(sizes))
	}
	if n >= 1 && n <= maxSize {
		want := sort.SearchInts(sizes, n) // smallest class >= n
		if got := tab.getIndex(n); got != want {
			t.Fatalf("k=%d min=%d: getIndex(%d) = %d (size %d), want %d (size %d)", 1<<shift, minSize, n, got, tab.size(got), want, sizes[want])
		}
		size := tab.size(want)
		if n > minSize && (size-n)<<shift > n {
			t.Fatalf("k=%d: size %d for %d wastes more than 1/%d", 1<<shift, size, n, 1<<shift)
		}
	}
	if n >= minSize && n <= maxSize {
		want := sort.SearchInts(sizes, n+1) - 1 // largest class <= n
		if got := tab.putIndex(n); got != want {
			t.Fatalf("k=%d min=%d: putIndex(%d) = %d, want %d (size %d)", 1<<shift, minSize, n, got, want, sizes[want])
		}
		// A buffer filed by Put serves every Get of its class.
		if tab.getIndex(tab.size(want)) != want {
			t.Fatalf("k=%d: Get of class size %d does not map back to class %d", 1<<shift, tab.size(want), want)
		}
	}
}

// TestClassTableModel checks the O(1) arithmetic against the model for every
// size up to the largest class, for every classes-per-doubling setting.
func TestClassTableModel(t *testing.T) {
	type table struct {
		shift            uint
		minSize, maxSize int
	}
	// The default table (4 per doubling, 256 B to 4 MiB) in full, and every
	// classes-per-doubling setting with three smallest classes up to 1 MiB.
	tables := []table{{2, DefaultMinSize, DefaultMaxSize}}
	for shift := uint(0); shift <= 3; shift++ {
		for _, minSize := range []int{16, 256, 4096} {
			tables = append(tables, table{shift, minSize, 1 << 20})
		}
	}
	for _, tc := range tables {
		shift, minSize, maxSize := tc.shift, tc.minSize, tc.maxSize
		{
			sizes := modelClasses(1<<shift, minSize, maxSize)
			tab := newClassTable(shift, minSize, maxSize)
			for i, s := range sizes {
				if got := tab.size(i); got != s {
					t.Fatalf("k=%d: size(%d) = %d, model %d", 1<<shift, i, got, s)
				}
			}
			for n := 1; n <= maxSize; n++ {
				checkTable(t, &tab, sizes, n)
			}
		}
	}
}

func FuzzClassTable(f *testing.F) {
	f.Add(uint8(2), uint8(8), uint8(22), uint32(33000))
	f.Add(uint8(0), uint8(4), uint8(30), uint32(1<<30-1))
	f.Add(uint8(3), uint8(10), uint8(10), uint32(1024))
	f.Fuzz(func(t *testing.T, shift, minExp, maxExp uint8, n uint32) {
		shift %= 4
		minExp = 4 + minExp%27
		maxExp = minExp + maxExp%(31-minExp)
		minSize, maxSize := 1<<minExp, 1<<maxExp
		if maxExp-minExp > 12 {
			return // keep the model small
		}
		sizes := modelClasses(1<<shift, minSize, maxSize)
		tab := newClassTable(uint(shift), minSize, maxSize)
		checkTable(t, &tab, sizes, int(n%uint32(maxSize))+1)
	})
}
