package decorator_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/storagetest"
)

func TestActionResultExpiryPassesTheSuite(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) cas.Storage { return decorator.ExpireActionResults(openDisk(t), time.Hour) })
}

// A result is served until its age limit, a miss from then on, and
// served again once uploaded anew.
func TestActionResultExpires(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	e := decorator.ExpireActionResults(openDisk(t), time.Hour)
	e.Jitter = 0
	e.Now = func() time.Time { return now }
	action := cas.DigestOf([]byte("an action"))
	result := []byte("\x0a\x02ok")
	if err := e.PutActionResult(ctx, action, result); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour - time.Second)
	if got, err := e.GetActionResult(ctx, action, cas.ClientLookup); err != nil || string(got) != string(result) {
		t.Fatalf("a second before its age limit: %q, %v; want %q", got, err, result)
	}
	now = now.Add(time.Second)
	if got, err := e.GetActionResult(ctx, action, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("at its age limit: %q, %v; want a miss", got, err)
	}
	if err := e.PutActionResult(ctx, action, result); err != nil {
		t.Fatal(err)
	}
	if got, err := e.GetActionResult(ctx, action, cas.ClientLookup); err != nil || string(got) != string(result) {
		t.Fatalf("uploaded again: %q, %v; want %q", got, err, result)
	}
}

// An instance's own limit holds for the results read and written through
// ForInstance: shorter, longer or none, beside the server's; an instance
// with none of its own follows MaxAge.
func TestActionResultExpiryPerInstance(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	e := decorator.ExpireActionResults(openDisk(t), 24*time.Hour)
	e.Now = func() time.Time { return now }
	e.Instances = func(instance string) (time.Duration, bool) {
		switch instance {
		case "nightly":
			return time.Hour, true
		case "release":
			return 0, true // never expires
		}
		return 0, false
	}
	result := []byte("\x0a\x02ok")
	stored := map[string]cas.Digest{}
	for _, instance := range []string{"nightly", "release", "team"} {
		d := cas.DigestOf([]byte("an action of " + instance))
		stored[instance] = d
		if err := e.ForInstance(instance).PutActionResult(ctx, d, result); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		after time.Duration
		hit   map[string]bool
	}{
		{time.Hour - 7*time.Minute, map[string]bool{"nightly": true, "release": true, "team": true}}, // inside the hour less its jitter
		{2 * time.Hour, map[string]bool{"nightly": false, "release": true, "team": true}},
		{48 * time.Hour, map[string]bool{"nightly": false, "release": true, "team": false}},
	} {
		now = time.Unix(1_700_000_000, 0).Add(c.after)
		for instance, want := range c.hit {
			got, err := e.ForInstance(instance).GetActionResult(ctx, stored[instance], cas.ClientLookup)
			if hit := err == nil && string(got) == string(result); hit != want {
				t.Errorf("%v after, instance %s: %q, %v; want a hit: %v", c.after, instance, got, err, want)
			}
		}
	}
}

// With jitter, each action expires at its own time between MaxAge-Jitter
// and MaxAge, and at the same one on every lookup.
func TestActionResultExpiryJitter(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 0)
	now := start
	e := decorator.ExpireActionResults(openDisk(t), 100*time.Minute)
	e.Now = func() time.Time { return now }
	const n = 50
	actions := make([]cas.Digest, n)
	for i := range actions {
		actions[i] = cas.DigestOf(fmt.Appendf(nil, "action %d", i))
		if err := e.PutActionResult(ctx, actions[i], []byte("r")); err != nil {
			t.Fatal(err)
		}
	}
	hits := func() (h int) {
		for _, a := range actions {
			if _, err := e.GetActionResult(ctx, a, cas.ClientLookup); err == nil {
				h++
			}
		}
		return h
	}
	now = start.Add(90*time.Minute - time.Second)
	if h := hits(); h != n {
		t.Fatalf("before MaxAge-Jitter: %d of %d hit", h, n)
	}
	now = start.Add(95 * time.Minute)
	mid := hits()
	if mid == 0 || mid == n {
		t.Fatalf("between MaxAge-Jitter and MaxAge: %d of %d hit; want some, not all", mid, n)
	}
	if again := hits(); again != mid {
		t.Fatalf("the same lookups a second time: %d hits, then %d", mid, again)
	}
	now = start.Add(100 * time.Minute)
	if h := hits(); h != 0 {
		t.Fatalf("at MaxAge: %d of %d hit", h, n)
	}
}

// A result stored without a limit is of no known age once one is set; a
// stamped result is served as uploaded once the limit is lifted.
func TestActionResultExpiryStamps(t *testing.T) {
	ctx := context.Background()
	d := openDisk(t)
	old := cas.DigestOf([]byte("stored before the limit"))
	if err := decorator.ExpireActionResults(d, 0).PutActionResult(ctx, old, []byte("old")); err != nil {
		t.Fatal(err)
	}
	if got, err := d.GetActionResult(ctx, old, cas.ClientLookup); err != nil || string(got) != "old" {
		t.Fatalf("without a limit the entry is stored as it came: %q, %v", got, err)
	}
	limited := decorator.ExpireActionResults(d, time.Hour)
	if _, err := limited.GetActionResult(ctx, old, cas.ClientLookup); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("a result of no known age: %v; want a miss", err)
	}
	stamped := cas.DigestOf([]byte("stored with the limit"))
	if err := limited.PutActionResult(ctx, stamped, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, err := decorator.ExpireActionResults(d, 0).GetActionResult(ctx, stamped, cas.ClientLookup); err != nil || string(got) != "new" {
		t.Fatalf("the limit lifted: %q, %v; want the result as uploaded", got, err)
	}
}
