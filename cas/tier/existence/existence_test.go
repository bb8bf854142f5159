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
