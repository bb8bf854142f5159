package azure_test

import (
	"testing"

	"github.com/membuf/membuf/cas/backend/azure"
	"github.com/membuf/membuf/internal/azuritetest"
)

// Azurite's well-known development account.
const (
	devAccount = azuritetest.Account
	devKey     = azuritetest.AccountKey
)

// startAzurite starts the shared Azurite harness (a real Azurite blob
// service on loopback, its data in a directory of the test's, so that Stop
// and Restart are an outage over the same data) with the containers named,
// and stops it when the test ends.
func startAzurite(t *testing.T, containers ...string) *azuritetest.Server {
	t.Helper()
	a := azuritetest.Start(t)
	for _, name := range containers {
		if err := azure.CreateContainer(t.Context(), a.Endpoint, devAccount, devKey, name); err != nil {
			t.Fatalf("creating container %s: %v", name, err)
		}
	}
	return a
}
