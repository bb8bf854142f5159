package asset

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	rapb "github.com/bazelbuild/remote-apis/build/bazel/remote/asset/v1"
	"github.com/membuf/membuf/cas"
)

// Qualifiers of the Remote Asset API that FetchBlob understands.
const (
	qualifierSRI          = "checksum.sri"       // the content's checksum(s): checked, and a sha256 names the CAS blob
	qualifierCanonicalID  = "bazel.canonical_id" // Bazel's identity of a download: part of what names an association
	qualifierResourceType = "resource_type"      // a media type: informational, part of what names an association
)

// knownQualifiers are the qualifiers a FetchBlob may carry without an
// association pushed for them.
var knownQualifiers = []string{qualifierSRI, qualifierCanonicalID, qualifierResourceType}

// An association is what a PushBlob, or a FetchBlob that downloaded, tells
// later fetches: this URI, with these qualifiers, is this blob. It is kept
// in the action cache under associationKey, so it lasts as long as the
// store keeps it, survives restarts and is shared through a shared tier;
// it is JSON, not an ActionResult, so gRPC's GetActionResult never serves
// it (it does not parse as one).
type association struct {
	Digest   string    `json:"digest"`           // hash/size
	Recorded time.Time `json:"recorded"`         // when pushed or fetched: against oldest_content_accepted
	Expires  time.Time `json:"expires,omitzero"` // PushBlob's expire_at; zero: none
	Pushed   bool      `json:"pushed,omitempty"` // from PushBlob (its qualifiers trusted, not checked)
	Origin   string    `json:"origin,omitempty"` // the URI it was downloaded from
}

// associationKey names the association of uri with qualifiers: the
// SHA-256 of a text no action digest's preimage is (the action cache
// holds both), made of the URI and the qualifiers sorted by name, then
// value, each string preceded by its length, so that no two different
// requests make the same text. Version 1 joined them with "=" and NUL,
// and a pushed qualifier value holding a NUL
// (bazel.canonical_id="y\x00resource_type=x") named the association of
// other qualifiers. Entries under version 1's names are not read: they are
// a cache's, costing a download or a push to make again, and reading them
// would keep answering what such a push planted. An association of a blob
// under a digest function other than SHA-256 has the function's name in
// its text's first line, so a fetch under one function never finds a blob
// named under another.
func associationKey(uri string, qualifiers []*rapb.Qualifier, f cas.Function) cas.Digest {
	q := make([][2]string, 0, len(qualifiers))
	for _, x := range qualifiers {
		q = append(q, [2]string{x.GetName(), x.GetValue()})
	}
	slices.SortFunc(q, func(a, b [2]string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]))
	})
	b := []byte("membuf remote asset association v2")
	if f != cas.SHA256 {
		b = append(append(b, ' '), f.String()...)
	}
	b = append(b, 0)
	b = lengthPrefixed(b, uri)
	b = binary.AppendUvarint(b, uint64(len(q)))
	for _, x := range q {
		b = lengthPrefixed(lengthPrefixed(b, x[0]), x[1])
	}
	sum := sha256.Sum256(b)
	return cas.Digest{Hash: hex.EncodeToString(sum[:])}
}

// lengthPrefixed appends s to b after its length (a uvarint).
func lengthPrefixed(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// recordAssociation stores a for uri with qualifiers.
func (s *Service) recordAssociation(ctx context.Context, uri string, qualifiers []*rapb.Qualifier, f cas.Function, a association) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.store.PutActionResult(ctx, associationKey(uri, qualifiers, f), data)
}

// lookupAssociation returns the blob associated with uri and qualifiers
// under function f, if there is one, recorded no earlier than oldest (zero: any), not
// expired, and whose blob is still in the CAS.
func (s *Service) lookupAssociation(ctx context.Context, uri string, qualifiers []*rapb.Qualifier, f cas.Function, oldest time.Time) (cas.Digest, association, bool, error) {
	data, err := s.store.GetActionResult(ctx, associationKey(uri, qualifiers, f), cas.ClientLookup)
	if errors.Is(err, cas.ErrNotFound) {
		return cas.Digest{}, association{}, false, nil
	}
	if err != nil {
		return cas.Digest{}, association{}, false, err
	}
	var a association
	if err := json.Unmarshal(data, &a); err != nil {
		s.log.Warn("remote asset: an association does not parse; ignored", "uri", uri, "err", err)
		return cas.Digest{}, association{}, false, nil
	}
	d, err := cas.ParseDigestStringFor(f, a.Digest)
	if err != nil {
		s.log.Warn("remote asset: an association names a bad digest; ignored", "uri", uri, "err", err)
		return cas.Digest{}, association{}, false, nil
	}
	if (!oldest.IsZero() && a.Recorded.Before(oldest)) || (!a.Expires.IsZero() && time.Now().After(a.Expires)) {
		return cas.Digest{}, association{}, false, nil
	}
	missing, err := s.store.FindMissing(ctx, []cas.Digest{d}, cas.ServerCheck)
	if err != nil {
		return cas.Digest{}, association{}, false, err
	}
	return d, a, len(missing) == 0, nil
}
