package objstore

import (
	"context"
	"net/http"
	"slices"
	"time"
)

// RetryDelay is the wait before the one retry of a request.
const RetryDelay = 100 * time.Millisecond

// Send sends a request with send, anew each attempt (its body and
// signature are the attempt's), and returns the answer if its status is
// one of ok, else readError's error for it. A request that may be
// repeated (retry) is sent once more after a dropped connection or an
// answer saying the store is busy or failed, as status reads the error
// (0: no answer): one quick retry, not a series, since the tier's backoff
// is the policy.
func Send(ctx context.Context, retry bool, send func() (*http.Response, error), readError func(*http.Response) error, status func(error) int, ok ...int) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		res, err := send()
		if err == nil {
			if slices.Contains(ok, res.StatusCode) {
				return res, nil
			}
			err = readError(res)
		}
		code := status(err)
		transient := code == 0 || code == http.StatusTooManyRequests || code >= 500
		if !retry || attempt > 0 || !transient || ctx.Err() != nil {
			return nil, err
		}
		t := time.NewTimer(RetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}
