package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/membuf/membuf/cas/backend/layout"
)

// BucketLayout reads the layout of the bucket raw names (an --upstream
// URL of an object store, without packs=): `membuf bucket`. It writes
// nothing.
func BucketLayout(ctx context.Context, raw string, timeout time.Duration) (layout.Found, error) {
	var found layout.Found
	err := withBucket(ctx, raw, timeout, func(ctx context.Context, b opened) (err error) {
		found, err = layout.Read(ctx, b.named)
		return err
	})
	return found, err
}

// ConvertBucket records packs as the layout of the bucket raw names
// (layout.Convert), and returns what it was: `membuf bucket
// --convert-to packs`. Nodes running over it keep their layout until
// they restart.
func ConvertBucket(ctx context.Context, raw string, timeout time.Duration) (layout.Found, error) {
	var was layout.Found
	err := withBucket(ctx, raw, timeout, func(ctx context.Context, b opened) (err error) {
		was, err = layout.Convert(ctx, b.named)
		return err
	})
	return was, err
}

// withBucket opens the object store raw names and calls f with it,
// within timeout.
func withBucket(ctx context.Context, raw string, timeout time.Duration, f func(context.Context, opened) error) error {
	u, err := ParseUpstream(raw)
	if err != nil {
		return err
	}
	if !u.ObjectStore() || u.forced != "" || u.retention != 0 {
		return fmt.Errorf("%s: want an object store's URL (s3://, gs://, azblob://) without packs= or retention=", u)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := u.kind.open(ctx, u.location, backendOptions{timeout: timeout, concurrency: 4, log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer b.closer.Close()
	return f(ctx, b)
}
