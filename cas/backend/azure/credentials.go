package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// DefaultAzureCredential's chain, as the Azure SDKs look in it and in
// this order: a service principal's secret or certificate (a PEM file)
// in the environment; workload identity (a federated token file, as AKS
// mounts it); managed identity (App Service's and Container Apps'
// endpoint, else the instance metadata service); the Azure CLI's login. The first two apply when
// their variables are set; managed identity and the CLI are tried in
// turn at the first request, and the one that answers is kept. Each
// gives a bearer token for the storage service, fetched again before it
// expires. A PKCS #12 or password-protected certificate, a user's
// password, Azure Arc's and Service Fabric's managed identity are refused
// at start.

// The storage service's token scope (a Microsoft Entra ID token
// request's) and resource (a managed identity's).
const (
	storageScope    = "https://storage.azure.com/.default"
	storageResource = "https://storage.azure.com"
)

// unsupported is the advice of an error refusing a credential.
const unsupported = "membuf supports a client secret (AZURE_CLIENT_SECRET) or PEM certificate, workload identity, managed identity, the Azure CLI's login, " + envKey + " and " + envSAS

// findToken picks the first source of the chain that applies; it reads
// the environment but sends nothing. hc is the client the fetches use.
func findToken(hc *http.Client) (*tokenSource, error) {
	tenant, clientID := os.Getenv("AZURE_TENANT_ID"), os.Getenv("AZURE_CLIENT_ID")
	authority := strings.TrimSuffix(cmpEnv("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com"), "/")
	if tenant != "" && clientID != "" {
		switch {
		case os.Getenv("AZURE_CLIENT_SECRET") != "":
			secret := os.Getenv("AZURE_CLIENT_SECRET")
			return newTokenSource("a client secret (AZURE_CLIENT_SECRET)", func(ctx context.Context) (accessToken, error) {
				return entraToken(ctx, hc, authority, tenant, url.Values{"client_id": {clientID}, "client_secret": {secret}})
			}), nil
		case os.Getenv("AZURE_CLIENT_CERTIFICATE_PATH") != "":
			path := os.Getenv("AZURE_CLIENT_CERTIFICATE_PATH")
			if os.Getenv("AZURE_CLIENT_CERTIFICATE_PASSWORD") != "" {
				return nil, errors.New("azure: a password-protected client certificate (AZURE_CLIENT_CERTIFICATE_PASSWORD) is not supported: give AZURE_CLIENT_CERTIFICATE_PATH a PEM file with an unencrypted key; " + unsupported)
			}
			cert, err := loadCertificate(path)
			if err != nil {
				return nil, fmt.Errorf("azure: AZURE_CLIENT_CERTIFICATE_PATH %s: %v", path, err)
			}
			tokenURL := entraTokenURL(authority, tenant)
			return newTokenSource("a client certificate (AZURE_CLIENT_CERTIFICATE_PATH)", func(ctx context.Context) (accessToken, error) {
				assertion, err := cert.assertion(clientID, tokenURL, time.Now())
				if err != nil {
					return accessToken{}, err
				}
				return entraToken(ctx, hc, authority, tenant, url.Values{"client_id": {clientID},
					"client_assertion_type": {jwtBearer}, "client_assertion": {assertion}})
			}), nil
		case os.Getenv("AZURE_USERNAME") != "":
			return nil, errors.New("azure: a user's password (AZURE_USERNAME) is not supported: " + unsupported)
		}
	}
	if file := os.Getenv("AZURE_FEDERATED_TOKEN_FILE"); file != "" && tenant != "" && clientID != "" {
		return newTokenSource("workload identity (AZURE_FEDERATED_TOKEN_FILE)", func(ctx context.Context) (accessToken, error) {
			assertion, err := os.ReadFile(file)
			if err != nil {
				return accessToken{}, err
			}
			return entraToken(ctx, hc, authority, tenant, url.Values{"client_id": {clientID},
				"client_assertion_type": {jwtBearer},
				"client_assertion":      {strings.TrimSpace(string(assertion))}})
		}), nil
	}
	switch {
	case os.Getenv("IDENTITY_SERVER_THUMBPRINT") != "":
		return nil, errors.New("azure: Service Fabric's managed identity is not supported: " + unsupported)
	case os.Getenv("IDENTITY_ENDPOINT") != "" && os.Getenv("IMDS_ENDPOINT") != "":
		return nil, errors.New("azure: Azure Arc's managed identity is not supported: " + unsupported)
	case os.Getenv("IDENTITY_ENDPOINT") != "" && os.Getenv("IDENTITY_HEADER") != "":
		return newTokenSource("managed identity (IDENTITY_ENDPOINT)", appServiceToken(hc, os.Getenv("IDENTITY_ENDPOINT"), os.Getenv("IDENTITY_HEADER"), clientID)), nil
	}
	imdsHost := strings.TrimSuffix(cmpEnv("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://169.254.169.254"), "/")
	// Off Azure nothing answers: the first request waits for it no
	// longer than this (the SDKs wait a second), then asks the CLI.
	imds := *hc
	imds.Timeout = min(hc.Timeout, 2*time.Second)
	return newTokenSource("managed identity or the Azure CLI", firstOf(
		namedFunc{"managed identity", imdsToken(&imds, imdsHost, clientID)},
		namedFunc{"the Azure CLI", cliToken(tenant)},
	)), nil
}

type namedFunc struct {
	name  string
	fetch tokenFunc
}

// firstOf tries each source in turn until one gives a token, and keeps to
// that one from then on. Its function is called under the tokenSource's
// lock, never twice at once.
func firstOf(sources ...namedFunc) tokenFunc {
	chosen := -1
	return func(ctx context.Context) (accessToken, error) {
		if chosen >= 0 {
			return sources[chosen].fetch(ctx)
		}
		var errs []string
		for i, s := range sources {
			t, err := s.fetch(ctx)
			if err == nil {
				chosen = i
				return t, nil
			}
			if ctx.Err() != nil {
				return accessToken{}, err
			}
			errs = append(errs, s.name+": "+err.Error())
		}
		return accessToken{}, fmt.Errorf("%s (or set %s or %s)", strings.Join(errs, "; "), envKey, envSAS)
	}
}

func cmpEnv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// jwtBearer is the type of a client assertion that is a JWT.
const jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// entraTokenURL is Microsoft Entra ID's token endpoint for tenant.
func entraTokenURL(authority, tenant string) string {
	return authority + "/" + url.PathEscape(tenant) + "/oauth2/v2.0/token"
}

// maxTokenAnswer bounds what is read of an answer with a token.
const maxTokenAnswer = 1 << 20

// tokenAnswer is the JSON of a token endpoint, a managed identity
// endpoint or the Azure CLI: the expiry in seconds from now or since the
// epoch, numbers or strings depending on who answers.
type tokenAnswer struct {
	AccessToken      string     `json:"access_token"`
	ExpiresIn        flexNumber `json:"expires_in"`
	ExpiresOn        flexNumber `json:"expires_on"`
	Error            string     `json:"error"`
	ErrorDescription string     `json:"error_description"`
	// The Azure CLI's.
	CLIAccessToken string `json:"accessToken"`
	CLIExpiresOn   string `json:"expiresOn"`
}

// flexNumber is a JSON integer, or a string holding one.
type flexNumber int64

func (n *flexNumber) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: %s", b)
	}
	*n = flexNumber(v)
	return nil
}

// token is a's token, expiring at its expires_on, else expires_in from
// now, else the CLI's local expiresOn; an hour from now if it says none.
func (a tokenAnswer) token(now time.Time) accessToken {
	t := accessToken{token: a.AccessToken + a.CLIAccessToken}
	switch {
	case a.ExpiresOn > 0:
		t.expires = time.Unix(int64(a.ExpiresOn), 0)
	case a.ExpiresIn > 0:
		t.expires = now.Add(time.Duration(a.ExpiresIn) * time.Second)
	default:
		if e, err := time.ParseInLocation("2006-01-02 15:04:05.999999", a.CLIExpiresOn, time.Local); err == nil {
			t.expires = e
		} else {
			t.expires = now.Add(time.Hour)
		}
	}
	return t
}

// fetchToken sends req and reads the token it answers.
func fetchToken(hc *http.Client, req *http.Request) (accessToken, error) {
	now := time.Now()
	res, err := hc.Do(req)
	if err != nil {
		return accessToken{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxTokenAnswer))
	if err != nil {
		return accessToken{}, err
	}
	var a tokenAnswer
	jerr := json.Unmarshal(body, &a)
	if res.StatusCode != http.StatusOK {
		if jerr == nil && a.Error != "" {
			desc, _, _ := strings.Cut(a.ErrorDescription, "\n")
			return accessToken{}, fmt.Errorf("%s %s: %s: %s: %s", req.Method, req.URL.Redacted(), res.Status, a.Error, desc)
		}
		return accessToken{}, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Redacted(), res.Status, bytes.TrimSpace(body[:min(len(body), 200)]))
	}
	if jerr != nil {
		return accessToken{}, fmt.Errorf("reading the answer of %s: %w", req.URL.Redacted(), jerr)
	}
	return a.token(now), nil
}

// entraToken asks Microsoft Entra ID's token endpoint of tenant for a
// token for the storage service, the client's own (client credentials
// grant); form holds the client's ID and its secret or assertion.
func entraToken(ctx context.Context, hc *http.Client, authority, tenant string, form url.Values) (accessToken, error) {
	form.Set("grant_type", "client_credentials")
	form.Set("scope", storageScope)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, entraTokenURL(authority, tenant), strings.NewReader(form.Encode()))
	if err != nil {
		return accessToken{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return fetchToken(hc, req)
}

// imdsToken asks the instance metadata service for the managed
// identity's token (a user-assigned one's if clientID is set).
func imdsToken(hc *http.Client, host, clientID string) tokenFunc {
	return func(ctx context.Context) (accessToken, error) {
		q := url.Values{"api-version": {"2018-02-01"}, "resource": {storageResource}}
		if clientID != "" {
			q.Set("client_id", clientID)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/metadata/identity/oauth2/token?"+q.Encode(), nil)
		if err != nil {
			return accessToken{}, err
		}
		req.Header.Set("Metadata", "true")
		return fetchToken(hc, req)
	}
}

// appServiceToken asks App Service's (and Container Apps', Functions')
// identity endpoint for the managed identity's token.
func appServiceToken(hc *http.Client, endpoint, secret, clientID string) tokenFunc {
	return func(ctx context.Context) (accessToken, error) {
		q := url.Values{"api-version": {"2019-08-01"}, "resource": {storageResource}}
		if clientID != "" {
			q.Set("client_id", clientID)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+q.Encode(), nil)
		if err != nil {
			return accessToken{}, err
		}
		req.Header.Set("X-IDENTITY-HEADER", secret)
		return fetchToken(hc, req)
	}
}

// cliToken asks the Azure CLI (az, on the PATH) for a token of the user
// logged in with az login.
func cliToken(tenant string) tokenFunc {
	return func(ctx context.Context) (accessToken, error) {
		args := []string{"account", "get-access-token", "--output", "json", "--resource", storageResource}
		if tenant != "" {
			args = append(args, "--tenant", tenant)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var out, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "az", args...)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		now := time.Now()
		if err := cmd.Run(); err != nil {
			return accessToken{}, fmt.Errorf("az account get-access-token: %w: %s", err, bytes.TrimSpace(stderr.Bytes()[:min(stderr.Len(), 200)]))
		}
		var a tokenAnswer
		if err := json.Unmarshal(out.Bytes(), &a); err != nil {
			return accessToken{}, fmt.Errorf("az account get-access-token's output: %w", err)
		}
		return a.token(now), nil
	}
}
