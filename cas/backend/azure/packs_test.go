package azure_test

import (
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/backend/azure"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/backend/packed/packedtest"
	"github.com/membuf/membuf/cas/tier"
	"github.com/membuf/membuf/cas/tier/backendtest"
)

// The container keeps packs: it is a packed.Bucket.
var _ packed.Bucket = (*azure.Backend)(nil)

// newPacked is a packed backend on the container rawURL names, closed when
// the test ends.
func newPacked(t *testing.T, rawURL string) *packed.Backend {
	t.Helper()
	b := newBackend(t, rawURL)
	return packedtest.New(t, packed.Config{Objects: b, Bucket: b})
}

// The named objects keep packed.Bucket's contract.
func TestNamedObjects(t *testing.T) {
	useKey(t)
	f := startAzurite(t, "membuf-test")
	n := 0
	packedtest.RunBucket(t, func(t *testing.T) packed.Bucket {
		n++
		return newBackend(t, "azblob://"+devAccount+"/membuf-test/named"+strings.Repeat("x", n)+"?endpoint="+f.Endpoint)
	})
}

// The backend suite with packs on Azurite, stopped and started
// again.
func TestPackedConformance(t *testing.T) {
	useKey(t)
	f := startAzurite(t, "membuf-test")
	n := 0
	backendtest.Run(t, func(t *testing.T) tier.Backend {
		n++
		return newPacked(t, "azblob://"+devAccount+"/membuf-test/packed"+strings.Repeat("x", n)+"?endpoint="+f.Endpoint)
	}, backendtest.Options{
		KeepsChecksums: true,
		ResolvesHashes: true,
		Outage:         f.Outage,
	})
}

// Two nodes with packs on one container behind the tier, with an outage.
func TestPackedBehindTheTier(t *testing.T) {
	useKey(t)
	f := startAzurite(t, "membuf-test")
	backendtest.RunTier(t, func(t *testing.T) tier.Backend {
		return newPacked(t, "azblob://"+devAccount+"/membuf-test/packed-tier?endpoint="+f.Endpoint)
	}, backendtest.Options{
		Outage: f.Outage,
	})
}
