package upload_test

import (
	"context"
	"errors"
	"testing"

	"github.com/membuf/membuf/cas/reapi/internal/upload"
)

// The budget's contract as its users (a Write stream's receiver, a Remote
// Asset download, the HTTP cache's PUT) rely on it: a request for more
// than the whole takes the whole; TryAcquire never waits; Acquire waits
// for a Release or gives up with its context; Held and Peak count.
func TestBudget(t *testing.T) {
	b := upload.NewBudget(100)
	ctx := context.Background()
	if got, err := b.Acquire(ctx, 30); got != 30 || err != nil {
		t.Fatalf("Acquire(30) = %d, %v", got, err)
	}
	if got := b.TryAcquire(80); got != 0 {
		t.Fatalf("TryAcquire(80) with 70 free took %d", got)
	}
	if got := b.TryAcquire(70); got != 70 {
		t.Fatalf("TryAcquire(70) with 70 free took %d", got)
	}
	if b.Held() != 100 || b.Peak() != 100 {
		t.Fatalf("held %d, peak %d; want 100, 100", b.Held(), b.Peak())
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := b.Acquire(short, 1); got != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire on a full budget with a cancelled context = %d, %v", got, err)
	}
	done := make(chan int64)
	go func() {
		got, _ := b.Acquire(ctx, 1000) // more than the whole: waits for all of it
		done <- got
	}()
	b.Release(30)
	b.Release(70)
	if got := <-done; got != b.Limit() {
		t.Fatalf("Acquire(1000) of a 100-byte budget took %d, want the whole", got)
	}
	b.Release(100)
	if b.Held() != 0 || b.Peak() != 100 {
		t.Fatalf("after releasing all: held %d, peak %d; want 0, 100", b.Held(), b.Peak())
	}
	b.Release(0) // nothing taken, nothing given back
	if got := b.TryAcquire(0); got != 0 {
		t.Fatalf("TryAcquire(0) took %d", got)
	}
}

func TestDefaultMaxInflight(t *testing.T) {
	if n := upload.DefaultMaxInflight(); n < 16<<20 || n > 256<<20 {
		t.Fatalf("default upload budget %d, outside 16 MiB..256 MiB", n)
	}
}
