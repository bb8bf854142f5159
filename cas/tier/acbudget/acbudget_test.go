package acbudget_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/tier/acbudget"
)

// endless is a body that never ends, counting what was read of it.
type endless struct{ read *int64 }

func (e endless) Read(p []byte) (int, error) {
	*e.read += int64(len(p))
	return len(p), nil
}

func (endless) Close() error { return nil }

// entry answers a Get with data (of its size, or of unknown size),
// noting the Limit each try was given.
func entry(data []byte, sized bool, limits *[]int64) acbudget.Get {
	return func(ctx context.Context) (io.ReadCloser, int64, error) {
		*limits = append(*limits, acbudget.Limit(ctx))
		size := int64(len(data))
		if !sized {
			size = -1
		}
		return io.NopCloser(bytes.NewReader(data)), size, nil
	}
}

// A read takes FirstTry of the budget; an entry larger is read again
// holding its size (or the cap, its size unknown), and one over the cap
// is ErrTooLarge, read no further than the cap and a byte.
func TestAReadHoldsWhatItMayRead(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		size         int
		sized        bool
		wantLimits   []int64
		wantTooLarge bool
	}{
		{100, true, []int64{acbudget.FirstTry}, false},
		{100, false, []int64{acbudget.FirstTry}, false},
		{0, false, []int64{acbudget.FirstTry}, false},
		{1 << 20, true, []int64{acbudget.FirstTry, 1 << 20}, false},
		{1 << 20, false, []int64{acbudget.FirstTry, acbudget.DefaultCap}, false},
		{acbudget.DefaultCap, false, []int64{acbudget.FirstTry, acbudget.DefaultCap}, false},
		{acbudget.DefaultCap + 1, false, []int64{acbudget.FirstTry, acbudget.DefaultCap}, true},
		{acbudget.DefaultCap + 1, true, []int64{acbudget.FirstTry}, true},
	} {
		b := acbudget.New(64<<20, acbudget.DefaultCap)
		data := bytes.Repeat([]byte{7}, c.size)
		var limits []int64
		got, _, err := b.Read(ctx, entry(data, c.sized, &limits))
		if c.wantTooLarge != errors.Is(err, acbudget.ErrTooLarge) || !c.wantTooLarge && (err != nil || !bytes.Equal(got, data)) {
			t.Errorf("%d bytes, sized %v: %d bytes, %v", c.size, c.sized, len(got), err)
		}
		if !slices.Equal(limits, c.wantLimits) {
			t.Errorf("%d bytes, sized %v: tries with limits %v, want %v", c.size, c.sized, limits, c.wantLimits)
		}
		if b.Held() != 0 || b.Peak() != c.wantLimits[len(c.wantLimits)-1] {
			t.Errorf("%d bytes, sized %v: held %d at the end, %d at most; want 0 and %d", c.size, c.sized, b.Held(), b.Peak(), c.wantLimits[len(c.wantLimits)-1])
		}
	}
}

// 32 reads of endless answers at once hold at most the budget together,
// and each reads at most its two tries' limits and a byte each.
func TestConcurrentEndlessReadsStayWithinTheBudget(t *testing.T) {
	const readers, budget = 32, 8 << 20
	b := acbudget.New(budget, acbudget.DefaultCap)
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			var read int64
			_, n, err := b.Read(context.Background(), func(context.Context) (io.ReadCloser, int64, error) {
				return endless{&read}, -1, nil
			})
			if !errors.Is(err, acbudget.ErrTooLarge) || n != read || read > acbudget.FirstTry+acbudget.DefaultCap+2 {
				t.Errorf("an endless read: %v, %d bytes read (counted %d); want ErrTooLarge within %d", err, read, n, acbudget.FirstTry+acbudget.DefaultCap+2)
			}
		})
	}
	wg.Wait()
	if b.Peak() > budget || b.Held() != 0 {
		t.Fatalf("held %d at most, %d at the end; want at most %d, and 0", b.Peak(), b.Held(), budget)
	}
}

// A read that cannot take budget before its context ends is ErrBusy.
func TestAReadWaitsForBudgetThenIsBusy(t *testing.T) {
	b := acbudget.New(acbudget.FirstTry, acbudget.DefaultCap)
	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, _, err := b.Read(context.Background(), func(context.Context) (io.ReadCloser, int64, error) {
			close(started)
			<-release
			return io.NopCloser(bytes.NewReader(nil)), 0, nil
		})
		done <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := b.Read(ctx, entry(nil, true, new([]int64))); !errors.Is(err, acbudget.ErrBusy) {
		t.Fatalf("a read while the budget is held: %v, want ErrBusy", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
