package access_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
)

func TestParseRuleClaims(t *testing.T) {
	for in, want := range map[string]string{
		"jwt:repository=acme/app":                      "jwt:repository=acme/app",
		"jwt:ref=refs/heads/main&repository=acme/app":  "jwt:ref=refs/heads/main&repository=acme/app",
		"jwt:repository=acme/app&ref=refs/heads/main":  "jwt:ref=refs/heads/main&repository=acme/app",
		"bob, jwt:repository_owner=acme, alice":        "alice,bob,jwt:repository_owner=acme",
		"jwt:ref=refs/heads/*":                         "jwt:ref=refs/heads/*",
		"jwt:groups=ci&groups=ci":                      "jwt:groups=ci",
		"jwt:email_verified=true&aud=membuf,jwt:sub=x": "jwt:aud=membuf&email_verified=true,jwt:sub=x",
	} {
		r, err := access.ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, bad := range []string{"jwt:", "jwt:repository", "jwt:=x", "jwt:a=b&", "alice,jwt:"} {
		if _, err := access.ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
	p := access.Policy{ReadCAS: access.Anyone(), WriteAC: mustRule(t, "jwt:ref=refs/heads/main")}
	if !p.NeedsTokens() || !p.NeedsIdentity() {
		t.Error("a policy naming tokens' claims does not say it needs tokens")
	}
	if (&access.Policy{WriteAC: access.Only("alice")}).NeedsTokens() {
		t.Error("a policy naming users says it needs tokens")
	}
}

// The claims a rule matches: strings, numbers, booleans and arrays' items;
// a prefix with a trailing *; every condition of a set.
func TestRuleMatchesClaims(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	v := newVerifier(t, iss, nil)
	id, err := v.Verify(t.Context(), iss.Token(t, map[string]any{
		"repository": "acme/app", "ref": "refs/heads/release/1.2", "run_attempt": 2,
		"email_verified": true, "groups": []any{"dev", "ci", []any{"nested"}}, "extra": map[string]any{"a": "b"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]bool{
		"jwt:repository=acme/app":                       true,
		"jwt:repository=acme/other":                     false,
		"jwt:repository=acme/*":                         true,
		"jwt:repository=acme":                           false,
		"jwt:ref=refs/heads/*&repository=acme/app":      true,
		"jwt:ref=refs/heads/main&repository=acme/app":   false,
		"jwt:run_attempt=2":                             true,
		"jwt:email_verified=true":                       true,
		"jwt:groups=ci":                                 true,
		"jwt:groups=admin":                              false,
		"jwt:groups=nested":                             false,
		"jwt:extra=b":                                   false,
		"jwt:missing=*":                                 false,
		"jwt:aud=membuf":                                true,
		"jwt:repository=acme/other,jwt:groups=dev":      true,
		"test-subject":                                  true,
		"someone-else,jwt:repository=acme/app&groups=x": false,
	} {
		p := access.Policy{ReadAC: mustRule(t, rule)}
		if got := p.Allows(access.ReadAC, id); got != want {
			t.Errorf("rule %q allows the token: %v; want %v", rule, got, want)
		}
	}
	// A user of another method with the same claims' name is no token.
	if (&access.Policy{ReadAC: mustRule(t, "jwt:sub=test-subject")}).Allows(access.ReadAC, access.Identity{Name: "test-subject", Method: "basic"}) {
		t.Error("a claims rule allows a basic-auth user")
	}
}

// The access file's per-instance rules take tokens' claims too.
func TestInstanceRulesClaims(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	ir, err := access.ReadInstanceRules(strings.NewReader(`
team-a  read-ac=jwt:repository=acme/* write-ac=jwt:repository=acme/app&ref=refs/heads/main
`))
	if err != nil {
		t.Fatal(err)
	}
	if !ir.NeedsTokens() {
		t.Error("rules naming claims do not say they need tokens")
	}
	control := &access.Control{Tokens: newVerifier(t, iss, nil), Instances: ir, Policy: access.Policy{ReadAC: access.Authenticated(), WriteAC: access.Authenticated()}}
	pr := grpcBearer(iss.Token(t, map[string]any{"repository": "acme/app", "ref": "refs/pull/1/merge"}))
	main := grpcBearer(iss.Token(t, map[string]any{"repository": "acme/app", "ref": "refs/heads/main"}))
	if _, denied := control.AuthorizeInstance(pr, "team-a", access.ReadAC); denied != nil {
		t.Errorf("a pull request reading team-a: %v", denied)
	}
	if _, denied := control.AuthorizeInstance(pr, "team-a", access.WriteAC); denied == nil || !strings.Contains(denied.Error(), `instance "team-a"`) {
		t.Errorf("a pull request writing team-a: %v", denied)
	}
	if _, denied := control.AuthorizeInstance(main, "team-a", access.WriteAC); denied != nil {
		t.Errorf("main writing team-a: %v", denied)
	}
	if _, denied := control.AuthorizeInstance(pr, "team-b", access.WriteAC); denied != nil {
		t.Errorf("a pull request writing team-b, which follows the policy: %v", denied)
	}
}

// Any rule ParseRule takes writes as one it reads back the same.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"anyone", "alice,bob", "jwt:repository=acme/app&ref=refs/heads/main", "bob,jwt:ref=refs/heads/*", "jwt:a=&a=*", "jwt:x==y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := access.ParseRule(s)
		if err != nil {
			return
		}
		r2, err := access.ParseRule(r.String())
		if err != nil {
			t.Fatalf("ParseRule(%q) = %q, which does not parse: %v", s, r, err)
		}
		if r2.String() != r.String() {
			t.Fatalf("ParseRule(%q) = %q, which reads back as %q", s, r, r2)
		}
	})
}

// Whatever a client sends as a token, verifying it never panics, and a
// token taken is one the issuer signed.
func FuzzVerifyToken(f *testing.F) {
	iss := accesstest.NewIssuer(f)
	v := newVerifier(f, iss, nil)
	f.Add(iss.Token(f, map[string]any{"repository": "acme/app", "groups": []any{"a", 1, true, nil, map[string]any{}}}))
	f.Add(unsignedToken(iss.Claims(nil)))
	f.Add(hmacToken(f, "secret", iss.Claims(nil)))
	f.Add("eyJhbGciOiJFUzI1NiJ9.e30.")
	f.Add("eyJ.eyJ.x")
	f.Add("a.b.c.d.e")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := v.Verify(t.Context(), token)
		if err != nil {
			return
		}
		if id.Method != "jwt" || id.Name == "" || id.Claims.String("iss") != iss.URL {
			t.Fatalf("token %q taken as %+v", token, id)
		}
	})
}

// Whatever claims an issuer signs, mapping them never panics, and a
// token taken matches a rule naming its own issuer.
func FuzzTokenClaims(f *testing.F) {
	iss := accesstest.NewIssuer(f)
	v := newVerifier(f, iss, nil)
	exp := time.Now().Add(24 * time.Hour).Unix()
	for _, c := range []struct{ claims, rule string }{
		{`{"repository":"acme/app","ref":"refs/heads/main"}`, "jwt:repository=acme/app&ref=refs/heads/main"},
		{`{"groups":["a",1,true,null,{"x":1},[2]],"n":1.5e3}`, "jwt:groups=a,jwt:n=1.5e3"},
		{`{"sub":""}`, "jwt:sub=*"},
		{`{"exp":"soon"}`, "anyone"},
		{`{"nbf":1e300}`, "anyone"},
		{`[]`, "nobody"},
	} {
		f.Add(c.claims, c.rule)
	}
	f.Fuzz(func(t *testing.T, claimsJSON, rule string) {
		r, err := access.ParseRule(rule)
		if err != nil {
			return
		}
		payload := []byte(claimsJSON)
		var m map[string]any
		if json.Unmarshal(payload, &m) == nil {
			// Make it a token the issuer would give, but for the fuzzed claims.
			for k, v := range iss.Claims(map[string]any{"exp": exp}) {
				if _, set := m[k]; !set {
					m[k] = v
				}
			}
			payload, _ = json.Marshal(m)
		}
		id, err := v.Verify(t.Context(), accesstest.SignPayload(t, iss.Key(), payload))
		if err != nil {
			return
		}
		(&access.Policy{ReadAC: r}).Allows(access.ReadAC, id)
		if !(&access.Policy{ReadAC: mustRule(t, "jwt:iss="+iss.URL)}).Allows(access.ReadAC, id) {
			t.Fatalf("a token of %s taken (%s) does not match its issuer", iss.URL, claimsJSON)
		}
	})
}

// The access file's /NAMESPACE lines give a keyed namespace's rules,
// apart from the instances'.
func TestNamespaceRules(t *testing.T) {
	iss := accesstest.NewIssuer(t)
	ir, err := access.ReadInstanceRules(strings.NewReader(`
/gradle  write-ac=jwt:ref=refs/heads/main
gradle            write-ac=nobody
`))
	if err != nil {
		t.Fatal(err)
	}
	if ir.Instances() != 1 || ir.Len() != 2 {
		t.Errorf("%d instances of %d lines; want 1 of 2", ir.Instances(), ir.Len())
	}
	control := &access.Control{Tokens: newVerifier(t, iss, nil), Instances: ir, Policy: access.Policy{ReadAC: access.Authenticated(), WriteAC: access.Authenticated()}}
	pr := bearer(iss.Token(t, map[string]any{"ref": "refs/pull/1/merge"}))
	main := bearer(iss.Token(t, map[string]any{"ref": "refs/heads/main"}))
	if _, denied := control.AuthorizeNamespace(main, "gradle", access.WriteAC); denied != nil {
		t.Errorf("main writing namespace gradle: %v", denied)
	}
	if _, denied := control.AuthorizeNamespace(pr, "gradle", access.WriteAC); denied == nil || !strings.Contains(denied.Error(), `namespace "gradle"`) {
		t.Errorf("a pull request writing namespace gradle: %v", denied)
	}
	if _, denied := control.AuthorizeNamespace(pr, "gradle", access.ReadAC); denied != nil {
		t.Errorf("a pull request reading namespace gradle, which follows the policy: %v", denied)
	}
	if _, denied := control.AuthorizeNamespace(pr, "sccache", access.WriteAC); denied != nil {
		t.Errorf("a pull request writing namespace sccache, which follows the policy: %v", denied)
	}
	if _, denied := control.AuthorizeInstance(main, "gradle", access.WriteAC); denied == nil {
		t.Error("the instance gradle took the namespace's rule")
	}
}
