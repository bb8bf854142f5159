package asset_test

import (
	"testing"

	"github.com/membuf/membuf/cas/reapi/internal/reapitest"
)

// TestAssetOnPlainServer runs the service's tests again on a plain gRPC
// server: both of reapi's serving modes must answer alike.
func TestAssetOnPlainServer(t *testing.T) {
	reapitest.RunPlain(t,
		TestFetchBlobBadRequests,
		TestFetchBlobDownloadsOnceThenServesFromTheCache,
		TestFetchBlobRefusals,
		TestFetchBlobChecksEveryChecksumOfACachedBlob,
		TestFetchBlobOfAnEndlessBodyIsRefusedWithinItsBound,
		TestPushBlobThenFetch,
	)
}
