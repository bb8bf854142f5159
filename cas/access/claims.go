package access

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/membuf/membuf/cas"
)

// Claims are a verified token's claims as the rules match them: each
// top-level claim's values as strings. A string is itself, a number its
// JSON text, a boolean "true" or "false", an array each of those it holds
// (a token's "aud" or "groups"); objects and null are left out, as no rule
// can name them.
type Claims struct {
	values map[string][]string
}

// maxClaims bounds how many claims a token may carry, and maxClaimValues
// how many values one array claim may hold: a token is small, and one
// that is not is not from an identity provider.
const (
	maxClaims      = 256
	maxClaimValues = 256
)

// parseClaims reads a JWT's payload, a JSON object.
func parseClaims(payload []byte) (*Claims, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return nil, fmt.Errorf("claims are not a JSON object: %v", err)
	}
	if len(raw) > maxClaims {
		return nil, fmt.Errorf("%d claims: at most %d are taken", len(raw), maxClaims)
	}
	c := &Claims{values: make(map[string][]string, len(raw))}
	for name, v := range raw {
		vals, err := claimValues(v)
		if err != nil {
			return nil, fmt.Errorf("claim %q: %v", cas.Clip(name), err)
		}
		if len(vals) > 0 {
			c.values[name] = vals
		}
	}
	return c, nil
}

// claimValues is a claim's values (Claims).
func claimValues(v json.RawMessage) ([]string, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, nil
	}
	switch v[0] {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		if len(items) > maxClaimValues {
			return nil, fmt.Errorf("%d values: at most %d are taken", len(items), maxClaimValues)
		}
		var out []string
		for _, it := range items {
			it = bytes.TrimSpace(it)
			if len(it) > 0 && (it[0] == '[' || it[0] == '{') {
				continue // nested: no rule names it
			}
			vals, err := claimValues(it)
			if err != nil {
				return nil, err
			}
			out = append(out, vals...)
		}
		return out, nil
	case '{', 'n':
		return nil, nil
	}
	// A number or a boolean: its JSON text, checked to be one.
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, err
	}
	return []string{string(v)}, nil
}

// Get returns the values of the claim name (nil if the token has none).
func (c *Claims) Get(name string) []string {
	if c == nil {
		return nil
	}
	return c.values[name]
}

// String returns the first value of the claim name, or "".
func (c *Claims) String(name string) string {
	if v := c.Get(name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// claimSet is one item of a Rule that names tokens rather than
// identities: "jwt:NAME=VALUE&NAME=VALUE...", which a token's claims
// match when every condition holds.
type claimSet []claimCondition

// claimCondition: the claim name has the value want, or, with prefix, a
// value that starts with want (written with a trailing '*').
type claimCondition struct {
	name, want string
	prefix     bool
}

// claimSetPrefix starts a rule item that names tokens.
const claimSetPrefix = "jwt:"

// parseClaimSet parses a rule item after its "jwt:".
func parseClaimSet(s string) (claimSet, error) {
	if s == "" {
		return nil, fmt.Errorf("%q: want jwt:CLAIM=VALUE, several joined with &", claimSetPrefix)
	}
	var set claimSet
	for cond := range strings.SplitSeq(s, "&") {
		name, want, ok := strings.Cut(cond, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want CLAIM=VALUE (a trailing * matches any value starting with what is before it)", cas.Clip(cond))
		}
		c := claimCondition{name: name, want: want}
		if strings.HasSuffix(want, "*") {
			c.want, c.prefix = strings.TrimSuffix(want, "*"), true
		}
		set = append(set, c)
	}
	slices.SortFunc(set, func(a, b claimCondition) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(set), nil
}

// matches reports whether claims satisfy every condition.
func (s claimSet) matches(claims *Claims) bool {
	if claims == nil {
		return false
	}
	for _, c := range s {
		if !slices.ContainsFunc(claims.Get(c.name), c.holds) {
			return false
		}
	}
	return true
}

func (c claimCondition) holds(v string) bool {
	if c.prefix {
		return strings.HasPrefix(v, c.want)
	}
	return v == c.want
}

func (c claimCondition) String() string {
	if c.prefix {
		return c.name + "=" + c.want + "*"
	}
	return c.name + "=" + c.want
}

func (s claimSet) String() string {
	parts := make([]string, len(s))
	for i, c := range s {
		parts[i] = c.String()
	}
	return claimSetPrefix + strings.Join(parts, "&")
}
