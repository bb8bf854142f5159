package azure_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

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
	cred, err := container.NewSharedKeyCredential(devAccount, devKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range containers {
		c, err := container.NewClientWithSharedKeyCredential(a.Endpoint+"/"+name, cred, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(context.Background(), nil); err != nil {
			t.Fatalf("creating container %s: %v", name, err)
		}
	}
	return a
}
