package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier"
)

// The calls the tests make of a bucket behind a tier's back, one object
// at a time.

func (b *Backend) put(ctx context.Context, k tier.Key, body io.Reader, size int64, sum string) error {
	return b.Put(ctx, []tier.Upload{{Key: k, Body: body, Size: size, SHA256: sum}})[0]
}

func (b *Backend) head(ctx context.Context, k tier.Key) (int64, error) {
	sizes := []int64{-1}
	if err := b.Stat(ctx, []tier.Key{k}, sizes); err != nil {
		return 0, err
	}
	if sizes[0] < 0 {
		return 0, fmt.Errorf("%w: %s", cas.ErrNotFound, k)
	}
	return sizes[0], nil
}

func (b *Backend) get(ctx context.Context, k tier.Key) (tier.Object, error) {
	return b.Get(ctx, k, 0)
}
