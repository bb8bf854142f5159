package existence_test

import (
	"testing"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier/existence"
)

// clock is a time the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestAnswersLiveForTheirOwnTimes(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	e := existence.NewAt(time.Minute, 10*time.Second, c.now)
	yes, no, unknown := cas.DigestOf([]byte("yes")), cas.DigestOf([]byte("no")), cas.DigestOf([]byte("?"))
	e.Set(yes, true)
	e.Set(no, false)
	want := func(d cas.Digest, exists, ok bool, when string) {
		t.Helper()
		if gotExists, gotOK := e.Get(d); gotExists != exists || gotOK != ok {
			t.Fatalf("%s: Get = %v, %v; want %v, %v", when, gotExists, gotOK, exists, ok)
		}
	}
	want(yes, true, true, "at once")
	want(no, false, true, "at once")
	want(unknown, false, false, "never asked")
	c.t = c.t.Add(11 * time.Second)
	want(no, false, false, "a no after its 10 s")
	want(yes, true, true, "a yes after 11 s")
	c.t = c.t.Add(time.Minute)
	want(yes, false, false, "a yes after its minute")
}

func TestANegativeMissingTTLKeepsNoNo(t *testing.T) {
	e := existence.New(time.Minute, -1)
	d := cas.DigestOf([]byte("no"))
	e.Set(d, false)
	if _, ok := e.Get(d); ok {
		t.Fatal("a no was kept with a negative TTL")
	}
}

// A bad object is absent whatever a later "yes" from the backend says,
// until this node uploads it again.
func TestABadMarkHoldsUntilAnUpload(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	e := existence.NewAt(time.Minute, 10*time.Second, c.now)
	d := cas.DigestOf([]byte("bad"))
	e.Set(d, true)
	e.MarkBad(d)
	if !e.IsBad(d) {
		t.Fatal("not bad after MarkBad")
	}
	e.Set(d, true) // a HEAD checks only the size
	if exists, _ := e.Get(d); exists || !e.IsBad(d) {
		t.Fatal("a yes replaced a bad mark")
	}
	e.Uploaded(d)
	if exists, ok := e.Get(d); !exists || !ok || e.IsBad(d) {
		t.Fatalf("after this node's upload: %v, %v, bad %v", exists, ok, e.IsBad(d))
	}
	e.MarkBad(d)
	c.t = c.t.Add(2 * time.Minute)
	if e.IsBad(d) {
		t.Fatal("a bad mark outlived its minute")
	}
}

// Memory stays bounded: past two generations, the oldest answers go.
func TestItHoldsAtMostTwoGenerations(t *testing.T) {
	e := existence.New(time.Hour, time.Hour)
	first := cas.Digest{Hash: "first", Size: 1}
	e.Set(first, true)
	for i := range 3 * 128 << 10 {
		e.Set(cas.Digest{Hash: "x", Size: int64(i + 2)}, true)
	}
	if _, ok := e.Get(first); ok {
		t.Fatal("the first answer survived three generations' worth of others")
	}
}

// Absent drops a yes at once, whatever its age, keeping the no as Set
// would (not at all with a negative negativeTTL), and leaves a bad mark.
func TestAbsentDropsAYes(t *testing.T) {
	for _, negativeTTL := range []time.Duration{10 * time.Second, -1} {
		c := &clock{t: time.Unix(1e9, 0)}
		e := existence.NewAt(time.Minute, negativeTTL, c.now)
		d, bad := cas.DigestOf([]byte("gone")), cas.DigestOf([]byte("bad"))
		e.Set(d, true)
		e.Absent(d)
		if exists, ok := e.Get(d); exists || ok != (negativeTTL > 0) {
			t.Fatalf("negativeTTL %v: Get after Absent = %v, %v; want a no, remembered only with a positive TTL", negativeTTL, exists, ok)
		}
		e.MarkBad(bad)
		e.Absent(bad)
		if !e.IsBad(bad) {
			t.Fatalf("negativeTTL %v: Absent dropped a bad mark", negativeTTL)
		}
	}
}

// Recent trusts a yes only within its maxAge, and a no for its own TTL.
func TestRecentTrustsAYesOnlyWithinItsAge(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	e := existence.NewAt(time.Minute, 30*time.Second, c.now)
	yes, no := cas.DigestOf([]byte("yes")), cas.DigestOf([]byte("no"))
	e.Set(yes, true)
	e.Set(no, false)
	c.t = c.t.Add(11 * time.Second)
	if _, ok := e.Recent(yes, 10*time.Second); ok {
		t.Fatal("Recent trusted an 11 s old yes with a 10 s age")
	}
	if exists, ok := e.Get(yes); !exists || !ok {
		t.Fatal("Get forgot an 11 s old yes that lives a minute")
	}
	if exists, ok := e.Recent(no, 10*time.Second); exists || !ok {
		t.Fatalf("Recent of an 11 s old no that lives 30 s: %v, %v", exists, ok)
	}
	if exists, ok := e.Recent(yes, time.Hour); !exists || !ok {
		t.Fatalf("Recent of a yes within its age: %v, %v", exists, ok)
	}
}
