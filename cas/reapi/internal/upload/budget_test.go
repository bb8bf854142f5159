package upload_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/reapi/internal/upload"
)

// The budget's contract as its users (a Write stream's receiver, a Remote
// Asset download, the HTTP cache's PUT) rely on it: a request for more
// than a client's share takes the share; TryAcquire never waits; Acquire
// waits for a Release or gives up with its context; Held and Peak count.
func TestBudget(t *testing.T) {
	b := upload.NewBudget(200) // a client's share: 100
	ctx := context.Background()
	if b.MaxTake() != 100 {
		t.Fatalf("a client of a 200-byte budget may take %d; want half, 100", b.MaxTake())
	}
	if got, err := b.Acquire(ctx, "a", 30); got != 30 || err != nil {
		t.Fatalf("Acquire(30) = %d, %v", got, err)
	}
	if got := b.TryAcquire("a", 80); got != 0 {
		t.Fatalf("TryAcquire(80) with 70 of the client's share free took %d", got)
	}
	if got := b.TryAcquire("a", 70); got != 70 {
		t.Fatalf("TryAcquire(70) with 70 of the client's share free took %d", got)
	}
	if b.Held() != 100 || b.Peak() != 100 {
		t.Fatalf("held %d, peak %d; want 100, 100", b.Held(), b.Peak())
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := b.Acquire(short, "a", 1); got != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire past the client's share with a cancelled context = %d, %v", got, err)
	}
	done := make(chan int64)
	go func() {
		got, _ := b.Acquire(ctx, "a", 1000) // more than a share: waits for all of it
		done <- got
	}()
	b.Release("a", 30)
	b.Release("a", 70)
	if got := <-done; got != b.MaxTake() {
		t.Fatalf("Acquire(1000) took %d, want a client's whole share", got)
	}
	b.Release("a", 100)
	if b.Held() != 0 || b.Peak() != 100 {
		t.Fatalf("after releasing all: held %d, peak %d; want 0, 100", b.Held(), b.Peak())
	}
	b.Release("a", 0) // nothing taken, nothing given back
	if got := b.TryAcquire("a", 0); got != 0 {
		t.Fatalf("TryAcquire(0) took %d", got)
	}
}

// TestClientCannotStarveAnother: a client that holds its whole share, and
// has more acquires waiting, leaves another client the rest of the budget
// at once: its waiters queue in its own share, not ahead of the other.
func TestClientCannotStarveAnother(t *testing.T) {
	b := upload.NewBudget(200)
	ctx := context.Background()
	if got, _ := b.Acquire(ctx, "greedy", 100); got != 100 {
		t.Fatalf("greedy took %d", got)
	}
	waiting, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := b.Acquire(waiting, "greedy", 50)
			errs <- err
		}()
	}
	deadline, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if got, err := b.Acquire(deadline, "other", 100); got != 100 || err != nil {
		t.Fatalf("another client behind a greedy one: took %d, %v; want the other half at once", got, err)
	}
	if got := b.TryAcquire("greedy", 1); got != 0 {
		t.Fatalf("the greedy client took %d past its share", got)
	}
	cancel()
	for range 10 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("a waiter past its client's share: %v, want its context's error", err)
		}
	}
	b.Release("other", 100)
	b.Release("greedy", 100)
	if b.Held() != 0 {
		t.Fatalf("held %d after everything was released", b.Held())
	}
	// Shares are forgotten when unused: a client's full share is free
	// again to it.
	if got := b.TryAcquire("greedy", 100); got != 100 {
		t.Fatalf("after release, the greedy client's share takes %d of 100", got)
	}
}

// TestReleaseOfAnotherClientPanics: budget given back under a client that
// does not hold it is a programming error, caught.
func TestReleaseOfAnotherClientPanics(t *testing.T) {
	b := upload.NewBudget(200)
	if got, _ := b.Acquire(context.Background(), "a", 10); got != 10 {
		t.Fatal("Acquire failed")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("releasing budget under a client that holds none did not panic")
		}
	}()
	b.Release("b", 10)
}

func TestDefaultMaxInflight(t *testing.T) {
	if n := upload.DefaultMaxInflight(); n < 16<<20 || n > 256<<20 {
		t.Fatalf("default upload budget %d, outside 16 MiB..256 MiB", n)
	}
}
