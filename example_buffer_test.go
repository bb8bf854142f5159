package membuf_test

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/membuf/membuf"
)

func ExampleBuffer_Split() {
	pool, _ := membuf.NewPool(membuf.Config{})
	b := membuf.Alloc(pool, 11)
	copy(b.Bytes(), "hello world")

	// b keeps "hello"; rest views " world". The memory goes back to the
	// pool when both are freed, in either order.
	rest := b.Split(5)
	fmt.Printf("%q %q\n", b.Bytes(), rest.Bytes())
	b.Free()
	fmt.Printf("%q\n", rest.Bytes()[1:])
	rest.Free()
	// Output:
	// "hello" " world"
	// "world"
}

func ExampleBuffer_Slice() {
	b := membuf.Wrap([]byte("key=value"))
	// A view with a reference of its own; b is unchanged.
	v := b.Slice(4, 9)
	b.Free()
	fmt.Println(string(v.Bytes()))
	v.Free()
	// Output: value
}

func ExampleBuffer_Free_doubleFree() {
	b := membuf.Wrap([]byte("data"))
	b.Free()
	defer func() {
		msg := fmt.Sprint(recover())
		fmt.Println(msg[:len("membuf: double free of buffer")])
	}()
	b.Free() // a programming error: panics, naming it
	// Output: membuf: double free of buffer
}

func ExampleWriter() {
	pool, _ := membuf.NewPool(membuf.Config{})
	w := membuf.NewWriter(pool, 0)
	for i := range 3 {
		fmt.Fprintf(w, "line %d\n", i) // packed into one pooled chunk
	}
	s := w.Slice() // the caller owns s now
	fmt.Println(len(s), "buffer,", s.Len(), "bytes")

	// A Reader frees the buffers as it consumes them.
	r := membuf.NewReader(s)
	r.WriteTo(os.Stdout)
	// Output:
	// 1 buffer, 21 bytes
	// line 0
	// line 1
	// line 2
}

func ExampleReadAll() {
	pool, _ := membuf.NewPool(membuf.Config{})
	// strings.Reader says how long it is, so ReadAll sizes its buffers and
	// its Slice up front.
	s, err := membuf.ReadAll(strings.NewReader("a payload of known size"), pool, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Free()
	fmt.Println(len(s), s.Len())

	// net.Buffers for a vectored write (writev on a connection).
	bufs := s.Buffers()
	bufs.WriteTo(os.Stdout)
	fmt.Println()
	// Output:
	// 1 23
	// a payload of known size
}

func ExampleSlice_Materialize() {
	pool, _ := membuf.NewPool(membuf.Config{})
	s := membuf.Slice{membuf.Wrap([]byte("scatter ")), membuf.Wrap([]byte("gather"))}
	m := s.Materialize(pool) // one contiguous pooled buffer
	s.Free()
	fmt.Println(string(m.Bytes()))
	m.Free()
	// Output: scatter gather
}

func ExampleNewReader() {
	s := membuf.Slice{membuf.Wrap([]byte("ab")), membuf.Wrap([]byte("cd"))}
	r := membuf.NewReader(s) // r owns s's references now
	defer r.Close()
	c, _ := r.ReadByte()
	rest, _ := io.ReadAll(r)
	fmt.Printf("%c %s %d\n", c, rest, r.Len())
	// Output: a bcd 0
}
