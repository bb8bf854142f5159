package access_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
)

// A line /NAMESPACE gives a keyed namespace its rules, apart from the
// instances: it is no instance (Instances), an instance named like it
// keeps the Policy's rules, and the refusal names the namespace.
func TestAuthorizeNamespaceFollowsTheAccessFile(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"ci": "ci-pw", "pr": "pr-pw"}))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := access.ReadInstanceRules(strings.NewReader("/nx write-ac=ci\n/turbo read-ac=ci write-ac=ci\nteam-a write-ac=pr\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rules.Len() != 3 || rules.Instances() != 1 {
		t.Fatalf("Len %d, Instances %d; want 3 and 1", rules.Len(), rules.Instances())
	}
	c := &access.Control{Users: users, Instances: rules, Policy: access.Policy{ReadAC: access.Authenticated(), WriteAC: access.Nobody()}}
	bearer := func(token string) access.Credentials {
		r := httptest.NewRequest(http.MethodPut, "/v1/cache/1", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return access.HTTPCredentials(r)
	}
	for _, tc := range []struct {
		token, namespace string
		op               access.Operation
		code             int // 0: allowed
	}{
		{"ci:ci-pw", "nx", access.WriteAC, 0},
		{"pr:pr-pw", "nx", access.WriteAC, http.StatusForbidden},
		{"pr:pr-pw", "nx", access.ReadAC, 0}, // not set: the Policy's
		{"", "nx", access.ReadAC, http.StatusUnauthorized},
		{"ci:wrong", "nx", access.ReadAC, http.StatusUnauthorized},
		{"ci-pw", "nx", access.ReadAC, http.StatusUnauthorized}, // no user:password
		{"pr:pr-pw", "turbo", access.ReadAC, http.StatusForbidden},
		{"ci:ci-pw", "gradle", access.WriteAC, http.StatusForbidden}, // no line: the Policy's
		{"pr:pr-pw", "team-a", access.WriteAC, http.StatusForbidden}, // an instance's line is no namespace's
	} {
		_, denied := c.AuthorizeNamespace(bearer(tc.token), tc.namespace, tc.op)
		code := 0
		if denied != nil {
			code, _ = denied.HTTP()
		}
		if code != tc.code {
			t.Errorf("%q %s on namespace %s: %d (%v); want %d", tc.token, tc.op, tc.namespace, code, denied, tc.code)
		}
		if code == http.StatusForbidden && !strings.Contains(denied.Error(), `namespace "`+tc.namespace+`"`) && tc.namespace != "gradle" && tc.namespace != "team-a" {
			t.Errorf("refusal %q names no namespace %q", denied.Error(), tc.namespace)
		}
	}
	// Bearer credentials are checked as Basic ones are, on every protocol.
	r := httptest.NewRequest(http.MethodGet, "/cas/x", nil)
	r.Header.Set("Authorization", "Bearer ci:ci-pw")
	if id, err := c.Identify(access.HTTPCredentials(r)); err != nil || id.Name != "ci" {
		t.Errorf("Identify(Bearer ci:ci-pw) = %v, %v; want ci", id, err)
	}
	r.Header.Set("Authorization", "Token ci:ci-pw")
	if _, err := c.Identify(access.HTTPCredentials(r)); err == nil || !strings.Contains(err.Error(), "Bearer") {
		t.Errorf("Identify(Token ...) = %v; want an error naming the schemes taken", err)
	}
}
