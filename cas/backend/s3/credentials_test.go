package s3

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// noAWS clears every variable the credential chain reads, and points the
// shared files at dir's (absent unless the test writes them).
func noAWS(t *testing.T, dir string) {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_ENDPOINT_URL_STS", "AWS_CA_BUNDLE"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// chainCredentials builds the Backend for a location naming profile (""
// for the default) and returns the credentials and the region it
// signs with.
func chainCredentials(t *testing.T, profile string) (credentials, string, error) {
	t.Helper()
	loc := Location{Bucket: "b", Endpoint: "http://127.0.0.1:1", PathStyle: true, Profile: profile}
	b, err := New(context.Background(), Config{Location: loc, RequestTimeout: 5 * time.Second})
	if err != nil {
		return credentials{}, "", err
	}
	c, err := b.c.creds.get(context.Background())
	return c, b.c.region, err
}

func TestCredentialsFromTheEnvironmentComeFirst(t *testing.T) {
	dir := t.TempDir()
	noAWS(t, dir)
	writeFile(t, filepath.Join(dir, "credentials"), "[default]\naws_access_key_id = FILE\naws_secret_access_key = filesecret\n")
	t.Setenv("AWS_ACCESS_KEY_ID", "ENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
	t.Setenv("AWS_SESSION_TOKEN", "envtoken")
	c, _, err := chainCredentials(t, "")
	if err != nil || c != (credentials{AccessKeyID: "ENV", SecretAccessKey: "envsecret", SessionToken: "envtoken"}) {
		t.Fatalf("%+v, %v; want the environment's", c, err)
	}
}

func TestCredentialsAndRegionFromTheSharedFiles(t *testing.T) {
	dir := t.TempDir()
	noAWS(t, dir)
	writeFile(t, filepath.Join(dir, "config"), `# comment
[default]
region = eu-west-1
[profile ci]
region = ap-south-1
aws_access_key_id = FROMCONFIG
s3 =
  addressing_style = path
`)
	writeFile(t, filepath.Join(dir, "credentials"), `[default]
aws_access_key_id = DEFAULTKEY
aws_secret_access_key = defaultsecret
[ci]
aws_access_key_id = CIKEY
aws_secret_access_key=cisecret
aws_session_token = citoken
`)
	c, region, err := chainCredentials(t, "")
	if err != nil || c.AccessKeyID != "DEFAULTKEY" || c.SecretAccessKey != "defaultsecret" || region != "eu-west-1" {
		t.Fatalf("default profile: %+v, region %q, %v", c, region, err)
	}
	t.Setenv("AWS_PROFILE", "ci")
	c, region, err = chainCredentials(t, "")
	if err != nil || c.AccessKeyID != "CIKEY" || c.SecretAccessKey != "cisecret" || c.SessionToken != "citoken" || region != "ap-south-1" {
		t.Fatalf("AWS_PROFILE=ci: %+v, region %q, %v; want the credentials file's keys over the config file's", c, region, err)
	}
	t.Setenv("AWS_REGION", "us-west-2")
	if _, region, _ := chainCredentials(t, "default"); region != "us-west-2" {
		t.Fatalf("region %q; want AWS_REGION's over the profile's", region)
	}
	if _, _, err := chainCredentials(t, "absent"); err == nil || !strings.Contains(err.Error(), `no profile "absent"`) {
		t.Fatalf("a profile the files do not have: %v", err)
	}
}

func TestProfilesMembufCannotUseAreRefusedByName(t *testing.T) {
	dir := t.TempDir()
	noAWS(t, dir)
	writeFile(t, filepath.Join(dir, "config"), "[profile sso]\nsso_session = corp\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = default\n")
	for _, p := range []string{"sso", "role"} {
		if _, _, err := chainCredentials(t, p); err == nil || !strings.Contains(err.Error(), "does not support") {
			t.Fatalf("profile %s: %v; want it refused, saying why", p, err)
		}
	}
}

func TestCredentialProcess(t *testing.T) {
	dir := t.TempDir()
	noAWS(t, dir)
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	writeFile(t, filepath.Join(dir, "config"), fmt.Sprintf("[default]\ncredential_process = echo '{\"Version\": 1, \"AccessKeyId\": \"PROC\", \"SecretAccessKey\": \"procsecret\", \"SessionToken\": \"proctoken\", \"Expiration\": \"%s\"}'\n", exp))
	c, _, err := chainCredentials(t, "")
	if err != nil || c.AccessKeyID != "PROC" || c.SecretAccessKey != "procsecret" || c.SessionToken != "proctoken" || c.Expires.IsZero() {
		t.Fatalf("%+v, %v; want the process's credentials", c, err)
	}
	writeFile(t, filepath.Join(dir, "config"), "[default]\ncredential_process = echo nope >&2; exit 3\n")
	if _, _, err := chainCredentials(t, ""); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("a failing process: %v; want its error", err)
	}
}

// stsServer answers AssumeRoleWithWebIdentity for token, with
// credentials that expire after ttl, and counts the calls.
func stsServer(t *testing.T, token string, ttl time.Duration, calls *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if r.Form.Get("Action") != "AssumeRoleWithWebIdentity" || r.Form.Get("WebIdentityToken") != token || r.Form.Get("RoleArn") != "arn:aws:iam::1:role/cache" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>")
			return
		}
		n := calls.Add(1)
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>WEB%d</AccessKeyId><SecretAccessKey>websecret</SecretAccessKey><SessionToken>webtoken</SessionToken><Expiration>%s</Expiration></Credentials>
</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`, n, time.Now().Add(ttl).UTC().Format(time.RFC3339))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Web identity from the environment (EKS's IRSA): the token file's token
// exchanged at STS, and exchanged again once the credentials near their
// expiry, not before.
func TestWebIdentityCredentialsAndTheirRefresh(t *testing.T) {
	dir := t.TempDir()
	noAWS(t, dir)
	var calls atomic.Int64
	srv := stsServer(t, "jwt-token", 2*refreshBefore, &calls)
	writeFile(t, filepath.Join(dir, "token"), "jwt-token\n")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(dir, "token"))
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/cache")
	t.Setenv("AWS_ENDPOINT_URL_STS", srv.URL)
	loc := Location{Bucket: "b", Endpoint: "http://127.0.0.1:1", PathStyle: true}
	b, err := New(context.Background(), Config{Location: loc})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 0 {
		t.Fatal("New sent a request")
	}
	for range 3 {
		c, err := b.c.creds.get(context.Background())
		if err != nil || c.AccessKeyID != "WEB1" || c.SecretAccessKey != "websecret" || c.SessionToken != "webtoken" {
			t.Fatalf("%+v, %v", c, err)
		}
	}
	b.c.creds.cached.Expires = time.Now().Add(refreshBefore - time.Second) // as if time passed
	if c, err := b.c.creds.get(context.Background()); err != nil || c.AccessKeyID != "WEB2" {
		t.Fatalf("credentials about to expire: %+v, %v; want them fetched again", c, err)
	}
	writeFile(t, filepath.Join(dir, "token"), "another")
	b.c.creds.cached = credentials{}
	if _, err := b.c.creds.get(context.Background()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a refused token: %v", err)
	}
	// The failure stands a moment for the requests waiting on it, then
	// the source is asked again.
	writeFile(t, filepath.Join(dir, "token"), "jwt-token")
	if _, err := b.c.creds.get(context.Background()); err == nil {
		t.Fatal("a fetch just after a failure was sent")
	}
	b.c.creds.failedTime = time.Now().Add(-retryFetch)
	if c, err := b.c.creds.get(context.Background()); err != nil || c.AccessKeyID != "WEB3" {
		t.Fatalf("after the failure's time: %+v, %v", c, err)
	}
}

func TestContainerCredentials(t *testing.T) {
	dir := t.TempDir()
	noAWS(t, dir)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/creds" || r.Header.Get("Authorization") != "pod-token" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"AccessKeyId":"ECS","SecretAccessKey":"ecssecret","Token":"ecstoken","Expiration":%q}`, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	defer srv.Close()
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/creds")
	writeFile(t, filepath.Join(dir, "token"), "pod-token\n")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", filepath.Join(dir, "token"))
	c, _, err := chainCredentials(t, "")
	if err != nil || c.AccessKeyID != "ECS" || c.SecretAccessKey != "ecssecret" || c.SessionToken != "ecstoken" {
		t.Fatalf("%+v, %v", c, err)
	}
}

// The instance metadata service, with a session token (IMDSv2), and
// without one where the service gives none (IMDSv1).
func TestInstanceMetadataCredentials(t *testing.T) {
	for _, v2 := range []bool{true, false} {
		dir := t.TempDir()
		noAWS(t, dir)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
				if !v2 {
					http.NotFound(w, r)
					return
				}
				fmt.Fprint(w, "imds-token")
			case v2 && r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imds-token":
				http.Error(w, "no token", http.StatusUnauthorized)
			case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
				fmt.Fprint(w, "cache-role\n")
			case r.URL.Path == "/latest/meta-data/iam/security-credentials/cache-role":
				fmt.Fprint(w, `{"Code":"Success","AccessKeyId":"EC2","SecretAccessKey":"ec2secret","Token":"ec2token","Expiration":"2999-01-01T00:00:00Z"}`)
			default:
				http.NotFound(w, r)
			}
		}))
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", srv.URL+"/")
		c, _, err := chainCredentials(t, "")
		srv.Close()
		if err != nil || c.AccessKeyID != "EC2" || c.SecretAccessKey != "ec2secret" || c.SessionToken != "ec2token" {
			t.Fatalf("IMDSv2 %v: %+v, %v", v2, c, err)
		}
	}
}

func TestNoCredentialsAnywhereIsAnError(t *testing.T) {
	noAWS(t, t.TempDir())
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if _, _, err := chainCredentials(t, ""); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("%v; want an error naming what to set", err)
	}
}
