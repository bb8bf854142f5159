// Package layout is how an object store's bucket says which layout its
// entries are kept in: packs (cas/backend/packed) or one object each (the
// store's own backend). The bucket records it in one small object,
// ObjectName, that a node reads at start (Decide); a Backend is the
// tier's backend over the layout the bucket is in, chosen when the
// bucket first answers.
//
// A bucket is in one of three states: recorded (the layout object names
// its layout and format), found (no layout object, but objects written
// by a membuf that did not record it: pack indexes say packs, anything
// else says one object each) or empty. A node writes the layout object
// only for packs, in two cases: the bucket is empty (packs are the
// default), or it holds packs already (recording what is). It never
// writes it over objects of the per-object layout: only the operator
// converts such a bucket (Convert). Every write of the layout object
// writes the same bytes (packs, Format), so that nodes starting at once
// on an empty bucket converge whatever order their writes land in,
// without a conditional create.
//
// It imports cas, cas/tier and cas/backend/packed only.
package layout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/tier"
)

// ObjectName is the layout object's name under the bucket's prefix: at
// the top, beside cas/, ac/ and packs/, since it describes all of them;
// a name no entry of either layout can take; JSON, so that an operator
// reads it with the store's own tools.
const ObjectName = "membuf-layout.json"

// Kind is a bucket's layout.
type Kind string

const (
	// Objects is the per-object layout: an entry is one object,
	// cas/{hash} or ac/{hash}.
	Objects Kind = "objects"
	// Packs is cas/backend/packed's: small entries many to a pack
	// object under packs/, named by index objects; larger ones in the
	// per-object layout.
	Packs Kind = "packs"
)

// Format is the version of the packs' format this code writes, and the
// newest it reads: a bucket recording a newer one was written by a
// newer membuf, and is refused.
const Format = 1

// maxRecordBytes bounds what is read of the layout object.
const maxRecordBytes = 4 << 10

// record is the layout object's content.
type record struct {
	Layout Kind `json:"layout"`
	Format int  `json:"format"`
}

// packsRecord is the one content a node writes: the same bytes from
// every node and every version that writes this Format.
var packsRecord = []byte(`{"layout":"packs","format":1}` + "\n")

// Found is what Read found of a bucket's layout.
type Found struct {
	// Kind is the bucket's layout; "" if it is empty.
	Kind Kind
	// Recorded: Kind (and Format) come from the layout object, not from
	// what the bucket holds.
	Recorded bool
	// Format is the recorded format (0 if not recorded).
	Format int
}

func (f Found) String() string {
	switch {
	case f.Kind == "":
		return "empty"
	case f.Recorded:
		return fmt.Sprintf("%s (format %d, recorded in %s)", f.Kind, f.Format, ObjectName)
	default:
		return fmt.Sprintf("%s (found in what the bucket holds; no %s)", f.Kind, ObjectName)
	}
}

// Read reads bucket's layout object; without one, it lists the bucket:
// a pack object says packs (written by a node with packs=true before
// the layout was recorded), any other object the per-object layout. An
// error is the bucket's (it did not answer: the caller may ask again)
// or a layout object that cannot be read, an *tier.ErrMisconfigured.
func Read(ctx context.Context, bucket packed.Bucket) (Found, error) {
	found, err := readRecord(ctx, bucket)
	if !errors.Is(err, cas.ErrNotFound) {
		return found, err
	}
	names, err := bucket.ListAfter(ctx, "packs/", "", 1)
	if err != nil {
		return Found{}, err
	}
	if len(names) > 0 {
		return Found{Kind: Packs}, nil
	}
	names, err = bucket.ListAfter(ctx, "", "", 2)
	if err != nil {
		return Found{}, err
	}
	for _, name := range names {
		if name != ObjectName { // written since the GET above
			return Found{Kind: Objects}, nil
		}
	}
	if len(names) > 0 { // the layout object appeared since: read it
		if found, err := readRecord(ctx, bucket); !errors.Is(err, cas.ErrNotFound) {
			return found, err
		}
	}
	return Found{}, nil
}

// readRecord reads the layout object; an error wrapping cas.ErrNotFound
// if there is none.
func readRecord(ctx context.Context, bucket packed.Bucket) (Found, error) {
	body, err := bucket.ReadRange(ctx, ObjectName, 0, -1)
	if err != nil {
		return Found{}, err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, maxRecordBytes+1))
	if err != nil {
		return Found{}, err
	}
	return parse(data)
}

// parse reads a layout object's content.
func parse(data []byte) (Found, error) {
	if len(data) > maxRecordBytes {
		return Found{}, &tier.ErrMisconfigured{Cause: fmt.Sprintf("the bucket's %s is over %d bytes: not one membuf wrote", ObjectName, maxRecordBytes)}
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return Found{}, &tier.ErrMisconfigured{Cause: fmt.Sprintf("the bucket's %s is not a layout record: %v", ObjectName, err)}
	}
	switch {
	case r.Layout != Packs && r.Layout != Objects:
		return Found{}, &tier.ErrMisconfigured{Cause: fmt.Sprintf("the bucket's %s names layout %q: want %q or %q", ObjectName, r.Layout, Packs, Objects)}
	case r.Format < 1:
		return Found{}, &tier.ErrMisconfigured{Cause: fmt.Sprintf("the bucket's %s names format %d: want 1 or more", ObjectName, r.Format)}
	case r.Format > Format:
		return Found{}, &tier.ErrMisconfigured{Cause: fmt.Sprintf("the bucket's %s names format %d, written by a newer membuf: this one reads up to %d", ObjectName, r.Format, Format)}
	}
	return Found{Kind: r.Layout, Recorded: true, Format: r.Format}, nil
}

// recordPacks writes the layout object naming packs and Format.
func recordPacks(ctx context.Context, bucket packed.Bucket) error {
	return bucket.WriteObject(ctx, ObjectName, packsRecord)
}

// Decide returns the layout a node uses in bucket, given the layout its
// configuration forces (want; "" forces none), and records it when
// that is packs and the bucket did not say so (see the package
// documentation). A forced layout that contradicts the bucket's is an
// *tier.ErrMisconfigured naming both; so is packs forced on a bucket of
// the per-object layout, which only Convert turns into packs. Other
// errors are the bucket's: the caller may ask again.
func Decide(ctx context.Context, bucket packed.Bucket, want Kind) (Kind, error) {
	found, err := Read(ctx, bucket)
	if err != nil {
		return "", err
	}
	switch {
	case found.Kind == "" && want == Objects:
		// Left unrecorded: the first entry written makes it a bucket of
		// the per-object layout, which nodes find without a record.
		return Objects, nil
	case found.Kind == "", found.Kind == Packs && !found.Recorded:
		if want == Objects {
			return "", contradiction(found, want)
		}
		if err := recordPacks(ctx, bucket); err != nil {
			return "", err
		}
		return Packs, nil
	case want != "" && want != found.Kind:
		return "", contradiction(found, want)
	}
	return found.Kind, nil
}

func contradiction(found Found, want Kind) error {
	forced := "packs=false"
	if want == Packs {
		forced = "packs=true"
	}
	fix := "remove packs= from the URL to use the bucket's layout"
	if want == Packs && found.Kind == Objects {
		fix += ", or convert the bucket to packs: membuf bucket --convert-to packs URL"
	}
	return &tier.ErrMisconfigured{Cause: fmt.Sprintf("%s, but the bucket's layout is %s: %s", forced, found, fix)}
}

// Convert makes bucket a bucket of packs, recording it: the operator's
// choice for a bucket of the per-object layout. Nothing is moved: a
// packed.Backend looks in the per-object layout for what no pack names,
// so every entry written before stays readable, and entries written
// after go to packs. It returns what the bucket was. Nodes running over
// the bucket keep their layout until they restart.
func Convert(ctx context.Context, bucket packed.Bucket) (Found, error) {
	found, err := Read(ctx, bucket)
	if err != nil || found.Kind == Packs && found.Recorded {
		return found, err
	}
	return found, recordPacks(ctx, bucket)
}
