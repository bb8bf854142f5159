package azure_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/membuf/membuf/cas/tier"
)

// TestSASToken: a SAS token from AZURE_STORAGE_SAS_TOKEN works, and
// neither an error's message nor its log value ever says its signature,
// even when the request failed before an answer (net/http's errors quote
// the whole URL).
func TestSASToken(t *testing.T) {
	a := startAzurite(t, "membuf-test")
	cred, err := container.NewSharedKeyCredential(devAccount, devKey)
	if err != nil {
		t.Fatal(err)
	}
	perms := sas.ContainerPermissions{Read: true, Write: true, Create: true}
	qp, err := sas.BlobSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(time.Hour),
		ContainerName: "membuf-test",
		Permissions:   perms.String(),
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	sig := qp.Signature()
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "?"+qp.Encode())
	b := newBackend(t, "azblob://"+devAccount+"/membuf-test/sas?endpoint="+a.Endpoint)
	if err := b.Probe(t.Context()); err != nil {
		t.Fatalf("Probe with a SAS token: %v", err)
	}
	data := []byte("a blob put with a SAS token")
	s := sha256.Sum256(data)
	k := tier.Key{Hash: hex.EncodeToString(s[:]), Size: int64(len(data))}
	if err := b.Put(t.Context(), []tier.Upload{{Key: k, Body: bytes.NewReader(data), Size: k.Size, SHA256: k.Hash}})[0]; err != nil {
		t.Fatalf("Put with a SAS token: %v", err)
	}
	obj, err := b.Get(t.Context(), k, 0)
	if err != nil {
		t.Fatalf("Get with a SAS token: %v", err)
	}
	got, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get with a SAS token: %q, %v", got, err)
	}

	a.Stop()
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	for _, err := range []error{
		func() error { _, err := b.Get(t.Context(), k, 0); return err }(),
		b.Put(t.Context(), []tier.Upload{{Key: k, Body: bytes.NewReader(data), Size: k.Size, SHA256: k.Hash}})[0],
		b.Stat(t.Context(), []tier.Key{k}, []int64{0}),
		b.Probe(t.Context()),
	} {
		if err == nil {
			t.Fatal("a request with Azurite stopped succeeded")
		}
		log.Error("request failed", "err", err)
		if strings.Contains(err.Error(), sig) || strings.Contains(err.Error(), url.QueryEscape(sig)) {
			t.Fatalf("an error says the SAS signature: %v", err)
		}
	}
	if strings.Contains(logged.String(), sig) || strings.Contains(logged.String(), url.QueryEscape(sig)) {
		t.Fatalf("the log says the SAS signature:\n%s", logged.String())
	}
	if !strings.Contains(logged.String(), "127.0.0.1") {
		t.Fatalf("the log does not say where the requests went, for the operator:\n%s", logged.String())
	}
}
