package reapi

import (
	"bytes"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas/internal/testblob"
	"github.com/membuf/membuf/internal/await"
)

// TestReadWithMembufPool runs ByteStream Read on the project's own pool in
// debug mode (which panics on a double Put), on the pooled path (a server
// made with ServerOptions, whatever the run's default), and checks that
// every buffer taken for a chunk was given back and reused.
func TestReadWithMembufPool(t *testing.T) {
	pool, err := membuf.NewPool(membuf.Config{Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWithServerOptions(t, 0, Options{Pool: pool}, ServerOptions(pool)...)
	data := testblob.Pattern(300<<10+123, 14)
	d := e.put(data)
	for range 3 {
		got, _, err := e.read(readName(d), 0, 0)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read: %v", err)
		}
	}
	var gets, puts, hits uint64
	count := func() bool {
		gets, puts, hits = 0, 0, 0
		st := pool.Stats()
		for _, c := range append(st.Classes, st.Oversize) {
			gets += c.Gets
			puts += c.Puts
			hits += c.Hits
		}
		return gets == puts
	}
	// gRPC frees the last chunks after writing them, which may be just after
	// the client has read them.
	await.Within(await.Timeout, count)
	if gets == 0 || gets != puts {
		t.Fatalf("pool: %d gets, %d puts; every chunk buffer must come back", gets, puts)
	}
	if hits == 0 {
		t.Fatal("no buffer was reused across reads")
	}
}
