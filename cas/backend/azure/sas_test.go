package azure_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/tier"
)

// TestSASToken: a SAS token from AZURE_STORAGE_SAS_TOKEN works, and
// neither an error's message nor its log value ever says its signature,
// even when the request failed before an answer (net/http's errors quote
// the whole URL).
func TestSASToken(t *testing.T) {
	a := startAzurite(t, "membuf-test")
	token, sig := containerSAS(t, "membuf-test", "rcw", time.Now().Add(time.Hour))
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "?"+token)
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

// containerSAS is a service SAS token for container in Azurite's account,
// with permissions perms until expiry, signed with its key as the
// service's documentation says (version 2020-12-06's string to sign), and
// its signature.
func containerSAS(t *testing.T, container, perms string, expiry time.Time) (token, sig string) {
	t.Helper()
	const version = "2020-12-06"
	se := expiry.UTC().Format("2006-01-02T15:04:05Z")
	toSign := strings.Join([]string{perms, "", se, "/blob/" + devAccount + "/" + container, "", "", "https,http", version, "c", "", "", "", "", "", "", ""}, "\n")
	key, err := base64.StdEncoding.DecodeString(devKey)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(toSign))
	sig = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	q := url.Values{"sv": {version}, "sr": {"c"}, "sp": {perms}, "se": {se}, "spr": {"https,http"}, "sig": {sig}}
	return q.Encode(), sig
}
