package tier

import (
	"context"
	"errors"
	"time"

	"github.com/membuf/membuf/cas"
)

// metered is the Store's Backend with every request counted (Stats'
// Requests, Latency and BytesUp): the same figures for every backend,
// kept here rather than in each.
type metered struct {
	b Backend
	c *counters
}

// outcome classifies a request's error.
func outcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, cas.ErrNotFound):
		return OutcomeNotFound
	}
	return OutcomeError
}

// Get counts the time until the backend answered (for a read, not its
// body).
func (m metered) Get(ctx context.Context, k Key, off int64) (Object, error) {
	start := time.Now()
	obj, err := m.b.Get(ctx, k, off)
	m.c.request(OpGet, outcome(err), time.Since(start))
	return obj, err
}

// Put counts each upload as a request, the batch's time shared among
// them.
func (m metered) Put(ctx context.Context, uploads []Upload) []error {
	start := time.Now()
	m.c.putCalls.Add(1)
	errs := m.b.Put(ctx, uploads)
	if len(errs) != len(uploads) {
		// A backend's bug must not become an index out of range: an
		// upload it did not answer for failed.
		answered := errs
		errs = make([]error, len(uploads))
		for i := range errs {
			errs[i] = errNoAnswer
			if i < len(answered) {
				errs[i] = answered[i]
			}
		}
	}
	took := time.Since(start) / time.Duration(max(1, len(uploads)))
	for i, err := range errs {
		m.c.request(OpPut, outcome(err), took)
		if err == nil {
			m.c.bytesUp.Add(uint64(uploads[i].Size))
		}
	}
	return errs
}

// Stat counts one request for the whole set of keys.
func (m metered) Stat(ctx context.Context, ks []Key, sizes []int64) error {
	start := time.Now()
	err := m.b.Stat(ctx, ks, sizes)
	m.c.request(OpStat, outcome(err), time.Since(start))
	return err
}

// Probe is not counted: it is not a client's request.
func (m metered) Probe(ctx context.Context) error { return m.b.Probe(ctx) }

var _ Backend = metered{}

var errNoAnswer = errors.New("tier: the backend returned no answer for this upload")
