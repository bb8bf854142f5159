package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The AWS credential chain, as the AWS SDKs look in it and in this
// order: the environment's keys; the profile's keys, credential_process
// or web identity in the shared files; web identity from the
// environment (EKS); the container's endpoint (ECS, EKS Pod Identity);
// the EC2 instance's metadata service. Only the first that applies is
// used. Temporary credentials are fetched when first needed and again
// shortly before they expire.

// fetchFunc fetches credentials; it is called again before they expire.
type fetchFunc func(ctx context.Context) (credentials, error)

// credentialSource hands out credentials, fetched once and again shortly
// before they expire. It is safe for concurrent use.
type credentialSource struct {
	// name says where the credentials come from, for the log.
	name  string
	fetch fetchFunc

	mu     sync.Mutex
	cached credentials
	// failed is the last fetch's error until retryFetch after it, so
	// that requests waiting on a source that does not answer fail
	// together, not each after its own timeout.
	failed     error
	failedTime time.Time
}

// retryFetch is how long a failed fetch's error stands.
const retryFetch = 5 * time.Second

// refreshBefore is how long before their expiry credentials are fetched
// again: a request signed with them must reach the store in time.
const refreshBefore = 5 * time.Minute

// get returns the credentials, fetching them if there are none yet or
// they expire soon.
func (s *credentialSource) get(ctx context.Context) (credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached.AccessKeyID != "" && (s.cached.Expires.IsZero() || time.Until(s.cached.Expires) > refreshBefore) {
		return s.cached, nil
	}
	if s.failed != nil && time.Since(s.failedTime) < retryFetch {
		return credentials{}, s.failed
	}
	c, err := s.fetch(ctx)
	if err != nil {
		err = fmt.Errorf("s3: credentials (%s): %w", s.name, err)
		if ctx.Err() == nil {
			s.failed, s.failedTime = err, time.Now()
		}
		return credentials{}, err
	}
	s.failed = nil
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return credentials{}, fmt.Errorf("s3: credentials (%s): no access key or secret", s.name)
	}
	s.cached = c
	return c, nil
}

// static is a fetchFunc of credentials that do not change.
func static(c credentials) fetchFunc {
	return func(context.Context) (credentials, error) { return c, nil }
}

// findCredentials picks the first source of the chain that applies, with
// profileName ("" for AWS_PROFILE's, or "default") from the shared files;
// it reads files but sends nothing. hc is the client the fetches over
// the network use.
func findCredentials(profileName string, p profile, hc *http.Client, region string) (*credentialSource, error) {
	id := cmpEnv("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY")
	secret := cmpEnv("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY")
	if id != "" && secret != "" {
		return &credentialSource{name: "environment", fetch: static(credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")})}, nil
	}
	where := "profile " + profileName
	switch {
	case p["aws_access_key_id"] != "" && p["role_arn"] == "":
		return &credentialSource{name: where, fetch: static(credentials{AccessKeyID: p["aws_access_key_id"], SecretAccessKey: p["aws_secret_access_key"], SessionToken: p["aws_session_token"]})}, nil
	case p["web_identity_token_file"] != "" && p["role_arn"] != "":
		return &credentialSource{name: where + ", web identity", fetch: webIdentity(hc, region, p["web_identity_token_file"], p["role_arn"], p["role_session_name"])}, nil
	case p["credential_process"] != "":
		return &credentialSource{name: where + ", credential_process", fetch: credentialProcess(p["credential_process"])}, nil
	case p["role_arn"] != "" || p["sso_session"] != "" || p["sso_start_url"] != "":
		// Assuming a role from another profile's credentials and IAM
		// Identity Center sessions need the SDK's STS and SSO clients,
		// which this package does without.
		return nil, fmt.Errorf("s3: %s uses role_arn with source_profile, or SSO, which membuf does not support: run membuf with the credentials exported (aws configure export-credentials --format env), or a credential_process", where)
	}
	if file, role := os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE"), os.Getenv("AWS_ROLE_ARN"); file != "" && role != "" {
		return &credentialSource{name: "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)", fetch: webIdentity(hc, region, file, role, os.Getenv("AWS_ROLE_SESSION_NAME"))}, nil
	}
	if full, rel := os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"), os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); full != "" || rel != "" {
		if full == "" {
			full = "http://169.254.170.2" + rel
		}
		return &credentialSource{name: "container endpoint", fetch: containerCredentials(hc, full)}, nil
	}
	if strings.EqualFold(os.Getenv("AWS_EC2_METADATA_DISABLED"), "true") {
		return nil, errors.New("s3: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in the shared AWS files")
	}
	endpoint := cmpEnv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
	if endpoint == "" {
		endpoint = "http://169.254.169.254"
	}
	// Off EC2 nothing answers: a request waits for it no longer than
	// this (the SDKs wait a second, and retry).
	imds := *hc
	imds.Timeout = min(hc.Timeout, 5*time.Second)
	return &credentialSource{name: "EC2 instance metadata", fetch: instanceMetadata(&imds, strings.TrimSuffix(endpoint, "/"))}, nil
}

// cmpEnv is the first of the environment variables names that is set.
func cmpEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// maxCredentialAnswer bounds what is read of an answer with credentials.
const maxCredentialAnswer = 1 << 20

// jsonCredentials is the JSON the container endpoint, the instance
// metadata service and a credential_process answer.
type jsonCredentials struct {
	Code            string
	Message         string
	AccessKeyID     string `json:"AccessKeyId"`
	SecretAccessKey string
	Token           string
	SessionToken    string
	Expiration      time.Time
}

func (j jsonCredentials) credentials() credentials {
	return credentials{AccessKeyID: j.AccessKeyID, SecretAccessKey: j.SecretAccessKey, SessionToken: j.Token + j.SessionToken, Expires: j.Expiration}
}

// fetchJSON sends req and decodes its JSON answer into v.
func fetchJSON(hc *http.Client, req *http.Request, v any) error {
	body, err := fetchBody(hc, req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("reading the answer of %s: %w", req.URL.Redacted(), err)
	}
	return nil
}

// fetchBody sends req and returns its body, or an error if it is not a
// success.
func fetchBody(hc *http.Client, req *http.Request) ([]byte, error) {
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxCredentialAnswer))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Redacted(), res.Status, bytes.TrimSpace(body[:min(len(body), 200)]))
	}
	return body, nil
}

// containerCredentials fetches from the container credentials endpoint,
// with the authorization token the environment gives.
func containerCredentials(hc *http.Client, endpoint string) fetchFunc {
	return func(ctx context.Context) (credentials, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return credentials{}, err
		}
		token := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
		if file := os.Getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return credentials{}, err
			}
			token = strings.TrimSpace(string(b))
		}
		if token != "" {
			req.Header.Set("Authorization", token)
		}
		var j jsonCredentials
		if err := fetchJSON(hc, req, &j); err != nil {
			return credentials{}, err
		}
		return j.credentials(), nil
	}
}

// instanceMetadata fetches the instance role's credentials from the EC2
// metadata service, with a session token (IMDSv2), or without one where
// the service does not give tokens.
func instanceMetadata(hc *http.Client, endpoint string) fetchFunc {
	return func(ctx context.Context) (credentials, error) {
		get := func(path, token string) ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+path, nil)
			if err != nil {
				return nil, err
			}
			if token != "" {
				req.Header.Set("X-Aws-Ec2-Metadata-Token", token)
			}
			return fetchBody(hc, req)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, endpoint+"/latest/api/token", nil)
		if err != nil {
			return credentials{}, err
		}
		req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
		token, err := fetchBody(hc, req)
		if err != nil && ctx.Err() != nil {
			return credentials{}, err
		}
		if err != nil {
			token = nil // IMDSv1
		}
		const base = "/latest/meta-data/iam/security-credentials/"
		roles, err := get(base, string(token))
		if err != nil {
			return credentials{}, fmt.Errorf("the instance's role: %w", err)
		}
		role, _, _ := strings.Cut(strings.TrimSpace(string(roles)), "\n")
		if role == "" {
			return credentials{}, errors.New("the instance has no IAM role")
		}
		body, err := get(base+url.PathEscape(role), string(token))
		if err != nil {
			return credentials{}, err
		}
		var j jsonCredentials
		if err := json.Unmarshal(body, &j); err != nil {
			return credentials{}, fmt.Errorf("the instance role's credentials: %w", err)
		}
		if j.Code != "" && j.Code != "Success" {
			return credentials{}, fmt.Errorf("the instance role's credentials: %s: %s", j.Code, j.Message)
		}
		return j.credentials(), nil
	}
}

// credentialProcess runs command (by the shell, as the AWS CLI does) and
// reads the credentials it prints.
func credentialProcess(command string) fetchFunc {
	return func(ctx context.Context) (credentials, error) {
		var out, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			return credentials{}, fmt.Errorf("credential_process: %w: %s", err, bytes.TrimSpace(stderr.Bytes()[:min(stderr.Len(), 200)]))
		}
		var j struct {
			Version int
			jsonCredentials
		}
		if err := json.Unmarshal(out.Bytes(), &j); err != nil {
			return credentials{}, fmt.Errorf("credential_process's output: %w", err)
		}
		if j.Version != 1 {
			return credentials{}, fmt.Errorf("credential_process's output has Version %d, not 1", j.Version)
		}
		return j.credentials(), nil
	}
}

// webIdentity exchanges the token in tokenFile for the role's temporary
// credentials (STS AssumeRoleWithWebIdentity, which is not signed).
func webIdentity(hc *http.Client, region, tokenFile, roleARN, session string) fetchFunc {
	return func(ctx context.Context) (credentials, error) {
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return credentials{}, err
		}
		if session == "" {
			session = fmt.Sprintf("membuf-%d", time.Now().UnixNano())
		}
		endpoint := cmpEnv("AWS_ENDPOINT_URL_STS")
		switch {
		case endpoint != "":
		case region != "":
			endpoint = "https://sts." + region + ".amazonaws.com" + chinaSuffix(region)
		default:
			endpoint = "https://sts.amazonaws.com"
		}
		form := url.Values{"Action": {"AssumeRoleWithWebIdentity"}, "Version": {"2011-06-15"}, "RoleArn": {roleARN},
			"RoleSessionName": {session}, "WebIdentityToken": {strings.TrimSpace(string(token))}}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(endpoint, "/")+"/", strings.NewReader(form.Encode()))
		if err != nil {
			return credentials{}, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		body, err := fetchBody(hc, req)
		if err != nil {
			return credentials{}, err
		}
		return parseAssumeRoleAnswer(body)
	}
}

// parseAssumeRoleAnswer reads the credentials of an STS
// AssumeRoleWithWebIdentity answer.
func parseAssumeRoleAnswer(body []byte) (credentials, error) {
	var a struct {
		Credentials struct {
			AccessKeyID     string    `xml:"AccessKeyId"`
			SecretAccessKey string    `xml:"SecretAccessKey"`
			SessionToken    string    `xml:"SessionToken"`
			Expiration      time.Time `xml:"Expiration"`
		} `xml:"AssumeRoleWithWebIdentityResult>Credentials"`
	}
	if err := xml.Unmarshal(body, &a); err != nil {
		return credentials{}, fmt.Errorf("reading STS's answer: %w", err)
	}
	c := a.Credentials
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return credentials{}, errors.New("STS's answer has no credentials")
	}
	return credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken, Expires: c.Expiration}, nil
}

// chinaSuffix is what AWS's domain takes in region: ".cn" in the China
// partition.
func chinaSuffix(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return ".cn"
	}
	return ""
}
