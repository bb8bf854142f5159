package decorator_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/disk"
)

// The decorators go around a store in one place, as the server composes
// them: what the protocols serve from counts clients' lookups and refuses
// blobs over a limit; the server's own checks are not counted.
func Example() {
	dir, err := os.MkdirTemp("", "decorator-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := disk.OpenStore(dir, 0, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	served := decorator.CountLookups(decorator.LimitSize(store, 1<<20))

	ctx := context.Background()
	data := []byte("hello")
	d := cas.DigestOf(data)
	if err := cas.Put(ctx, served, d, data, cas.Uncompressed); err != nil {
		log.Fatal(err)
	}
	missing, _ := served.FindMissing(ctx, []cas.Digest{d, cas.DigestOf([]byte("absent"))}, cas.ClientLookup)
	fmt.Println("missing:", len(missing))
	stored, _ := cas.Contains(ctx, served, d) // the server's own check: not counted
	fmt.Println("stored:", stored)
	hits, misses := served.Lookups()
	fmt.Println("hits:", hits, "misses:", misses)
	// Output:
	// missing: 1
	// stored: true
	// hits: 1 misses: 1
}
