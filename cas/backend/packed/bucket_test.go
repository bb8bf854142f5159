package packed_test

import (
	"testing"

	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/packed/packedtest"
)

// The tests' in-memory bucket keeps the contract the real ones do.
func TestMemBucketIsABucket(t *testing.T) {
	packedtest.RunBucket(t, func(t *testing.T) packed.Bucket { return packed.NewMemBucket() })
}
