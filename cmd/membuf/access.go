package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

// accessFlags are serve's flags for TLS, authentication and the access
// policy.
type accessFlags struct {
	tls            server.TLSFiles
	htpasswd       string
	rules          [4]string // per access.Operation, "" for the default
	anonymousReads bool
	readOnly       bool
	accessFile     string // --access-file: instances' action cache rules
	jwt            access.TokenConfig
}

var ruleFlagNames = [4]string{access.ReadCAS: "read-cas", access.WriteCAS: "write-cas", access.ReadAC: "read-ac", access.WriteAC: "write-ac"}

func (a *accessFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.tls.Cert, "tls-cert", "", "PEM certificate `file` (with its chain) for TLS on the gRPC and HTTP listeners; needs --tls-key")
	fs.StringVar(&a.tls.Key, "tls-key", "", "PEM private key `file` for --tls-cert")
	fs.StringVar(&a.tls.ClientCA, "tls-client-ca", "", "PEM `file` of the CAs whose client certificates identify gRPC clients (mutual TLS);\nthe certificate's common name is the identity the access rules name; needs --tls-cert")
	fs.StringVar(&a.htpasswd, "htpasswd", "", "htpasswd `file` of users and bcrypt hashes (htpasswd -B) for HTTP basic authentication\n(gRPC metadata authorization: Basic ..., as Bazel's --remote_header or a credential helper sends it)")
	whats := [4]string{"read blobs (ByteStream Read, BatchReadBlobs, GetTree, FindMissingBlobs)",
		"write blobs (ByteStream Write, BatchUpdateBlobs, QueryWriteStatus)",
		"read the action cache (GetActionResult)",
		"write the action cache (UpdateActionResult)"}
	for op, name := range ruleFlagNames {
		fs.StringVar(&a.rules[op], name, "", fmt.Sprintf("`who` may %s: anyone, authenticated, nobody, or a comma-separated list of\nidentities (default: anyone without --htpasswd, --tls-client-ca or --jwt-issuer, authenticated with any);\nan item jwt:CLAIM=VALUE&CLAIM=VALUE admits the tokens whose claims have those values (VALUE* a prefix)", whats[op]))
	}
	fs.BoolVar(&a.anonymousReads, "anonymous-reads", false, "reads for everyone, writes for authenticated clients: --read-cas anyone --read-ac anyone")
	fs.BoolVar(&a.readOnly, "read-only", false, "no one writes: --write-cas nobody --write-ac nobody")
	fs.StringVar(&a.jwt.Issuer, "jwt-issuer", "", "bearer tokens (JWTs: gRPC metadata authorization: Bearer ..., HTTP Authorization: Bearer ..., or\nbasic auth whose password is one) are taken from this issuer `URL` (their iss); keys by OpenID Connect\ndiscovery unless --jwt-jwks-url or --jwt-keys-file; needs --jwt-audience")
	fs.StringVar(&a.jwt.Audience, "jwt-audience", "", "the `value` a token's aud must hold for this server")
	fs.StringVar(&a.jwt.JWKSURL, "jwt-jwks-url", "", "`URL` of the issuer's keys (a JWKS document), fetched every 15 minutes and when a token names a new key")
	fs.StringVar(&a.jwt.KeysFile, "jwt-keys-file", "", "JWKS `file` of the issuer's keys, read again on SIGHUP")
	fs.StringVar(&a.jwt.IdentityClaim, "jwt-identity-claim", "sub", "the `claim` whose value is a token's identity, as the access rules name it")
	fs.DurationVar(&a.jwt.ClockSkew, "jwt-clock-skew", access.DefaultClockSkew, "grace for the issuer's clock on a token's exp and nbf, at most 5m")
	fs.StringVar(&a.accessFile, "access-file", "", "`file` of per-instance action cache rules, with --instance-isolation: a line per instance,\n\"NAME read-ac=WHO write-ac=WHO ac-max-age=DURATION\" (any of them; WHO as for --read-ac), which replace\n--read-ac, --write-ac and --ac-max-age for that instance; a NAME /NAMESPACE names a keyed namespace\nof the HTTP cache (/nx, /turbo, /maven, /gradle), without --instance-isolation")
}

// resolve validates the flags, loads what they name, and returns the
// access control for cas (nil: everyone may do everything, as without any
// of these flags) and the TLS material (nil: plaintext).
// instanceIsolation is --instance-isolation's: without it, an access file
// may name keyed namespaces only.
func (a *accessFlags) resolve(instanceIsolation bool) (*access.Control, *server.TLSMaterial, error) {
	switch {
	case (a.tls.Cert == "") != (a.tls.Key == ""):
		return nil, nil, usageError("--tls-cert and --tls-key go together")
	case a.tls.ClientCA != "" && a.tls.Cert == "":
		return nil, nil, usageError("--tls-client-ca needs --tls-cert and --tls-key: client certificates come with TLS")
	case a.anonymousReads && (a.rules[access.ReadCAS] != "" || a.rules[access.ReadAC] != ""):
		return nil, nil, usageError("--anonymous-reads sets --read-cas and --read-ac; give one or the other")
	case a.readOnly && (a.rules[access.WriteCAS] != "" || a.rules[access.WriteAC] != ""):
		return nil, nil, usageError("--read-only sets --write-cas and --write-ac; give one or the other")
	}
	var material *server.TLSMaterial
	if a.tls.Cert != "" {
		m, err := a.tls.Load()
		if err != nil {
			return nil, nil, usageError("%v", err)
		}
		material = m
	}
	var users *access.Htpasswd
	if a.htpasswd != "" {
		u, err := access.LoadHtpasswd(a.htpasswd)
		if err != nil {
			return nil, nil, usageError("--htpasswd: %v", err)
		}
		users = u
	}
	tokens, err := a.tokens()
	if err != nil {
		return nil, nil, err
	}
	canAuthenticate := users != nil || a.tls.ClientCA != "" || tokens != nil
	def := "anyone"
	if canAuthenticate {
		def = "authenticated"
	}
	rules := a.rules
	for op := range rules {
		if rules[op] == "" {
			rules[op] = def
		}
	}
	if a.anonymousReads {
		if !canAuthenticate {
			return nil, nil, usageError("--anonymous-reads leaves writes to authenticated clients, and without --htpasswd, --tls-client-ca or --jwt-issuer no one can authenticate (for a server no one writes to, use --read-only)")
		}
		rules[access.ReadCAS], rules[access.ReadAC] = "anyone", "anyone"
	}
	if a.readOnly {
		rules[access.WriteCAS], rules[access.WriteAC] = "nobody", "nobody"
	}
	var parsed [4]access.Rule
	for op, s := range rules {
		r, err := access.ParseRule(s)
		if err != nil {
			return nil, nil, usageError("--%s %v", ruleFlagNames[op], err)
		}
		parsed[op] = r
	}
	policy := access.Policy{ReadCAS: parsed[access.ReadCAS], WriteCAS: parsed[access.WriteCAS], ReadAC: parsed[access.ReadAC], WriteAC: parsed[access.WriteAC]}
	if policy.NeedsTokens() && tokens == nil {
		return nil, nil, usageError("the access rules (%s) name tokens' claims, but without --jwt-issuer no token is taken", policy.String())
	}
	if policy.NeedsIdentity() && !canAuthenticate {
		return nil, nil, usageError("the access rules (%s) name authenticated clients, but without --htpasswd, --tls-client-ca or --jwt-issuer no one can authenticate", policy.String())
	}
	var instances *access.InstanceRules
	if a.accessFile != "" {
		ir, err := access.LoadInstanceRules(a.accessFile)
		if err != nil {
			return nil, nil, usageError("--access-file: %v", err)
		}
		if ir.Instances() > 0 && !instanceIsolation {
			return nil, nil, usageError("--access-file %s names instances' rules, which mean nothing while every instance shares one action cache: add --instance-isolation (or name only keyed namespaces, /NAMESPACE)", a.accessFile)
		}
		if ir.NeedsTokens() && tokens == nil {
			return nil, nil, usageError("--access-file %s names tokens' claims, but without --jwt-issuer no token is taken", a.accessFile)
		}
		if ir.NeedsIdentity() && !canAuthenticate {
			return nil, nil, usageError("--access-file %s names authenticated clients, but without --htpasswd, --tls-client-ca or --jwt-issuer no one can authenticate", a.accessFile)
		}
		instances = ir
	}
	if !canAuthenticate && !a.readOnly && a.rules == [4]string{} && instances == nil {
		return nil, material, nil // no access control at all: as before these flags
	}
	return &access.Control{Policy: policy, Users: users, Tokens: tokens, ClientCertificates: a.tls.ClientCA != "", Instances: instances}, material, nil
}

// jwtStartTimeout bounds fetching the issuer's discovery document and keys
// at the start.
const jwtStartTimeout = 30 * time.Second

// tokens returns the bearer tokens' verifier the --jwt-* flags configure,
// nil without --jwt-issuer, its keys loaded.
func (a *accessFlags) tokens() (*access.TokenVerifier, error) {
	if a.jwt.Issuer == "" {
		if a.jwt.Audience != "" || a.jwt.JWKSURL != "" || a.jwt.KeysFile != "" {
			return nil, usageError("--jwt-audience, --jwt-jwks-url and --jwt-keys-file configure --jwt-issuer's tokens: give --jwt-issuer")
		}
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), jwtStartTimeout)
	defer cancel()
	v, err := access.NewTokenVerifier(ctx, a.jwt)
	if err != nil {
		return nil, usageError("--jwt-issuer: %v", err)
	}
	return v, nil
}
