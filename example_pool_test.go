package membuf_test

import (
	"fmt"
	"runtime"

	"github.com/membuf/membuf"
)

func ExampleNewPool() {
	pool, err := membuf.NewPool(membuf.Config{
		MaxSize:  1 << 20,  // classes up to 1 MiB
		Budget:   16 << 20, // retain at most 16 MiB
		Clearing: membuf.ClearNone,
	})
	if err != nil {
		panic(err)
	}
	b := pool.Get(33000) // the 40 KiB class (at most 25% extra), not a 64 KiB or 1 MiB tier
	fmt.Println(len(*b), cap(*b))
	pool.Put(b)
	pool.Get(33000) // the same buffer again: nothing allocated
	fmt.Println(pool.Stats().Total().Hits)
	// Output:
	// 33000 40960
	// 1
}

func ExampleNewPool_badConfig() {
	_, err := membuf.NewPool(membuf.Config{ClassesPerDoubling: 3})
	fmt.Println(err)
	// Output:
	// membuf: invalid Config.ClassesPerDoubling 3: want 1, 2, 4 or 8 (0 for the default, 4)
}

func ExamplePool_Stats() {
	pool, _ := membuf.NewPool(membuf.Config{})
	var held []*[]byte
	for range 3 {
		held = append(held, pool.Get(5000))
	}
	for _, b := range held {
		pool.Put(b)
	}
	runtime.GC() // retained buffers survive collections
	runtime.GC()
	pool.Put(pool.Get(5000))
	for _, c := range pool.Stats().Classes {
		if c.Gets > 0 {
			fmt.Printf("class %d: gets %d hits %d misses %d puts %d retained %d (%d bytes)\n",
				c.Size, c.Gets, c.Hits, c.Misses, c.Puts, c.RetainedBuffers, c.RetainedBytes)
		}
	}
	// Output:
	// class 5120: gets 4 hits 1 misses 3 puts 4 retained 3 (15360 bytes)
}

func ExamplePool_Put_foreign() {
	pool, _ := membuf.NewPool(membuf.Config{})
	// A slice that did not come from the pool is filed by its capacity:
	// 1000 bytes fill the 896-byte class, so Gets of up to 896 bytes can
	// reuse it.
	mine := make([]byte, 10, 1000)
	pool.Put(&mine)
	for _, c := range pool.Stats().Classes {
		if c.Puts > 0 {
			fmt.Println("class", c.Size, "puts", c.Puts)
		}
	}
	// Output:
	// class 896 puts 1
}
