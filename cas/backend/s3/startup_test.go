package s3

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/internal/miniotest"

	"github.com/membuf/membuf/cas/tier"
)

// openFreshTier opens a Store over a fresh disk store on loc, and returns
// the error openTier gives.
func openFreshTier(t *testing.T, loc Location) error {
	t.Helper()
	dir := t.TempDir()
	d, err := disk.OpenStore(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := openTier(context.Background(), d, tierOptions{Location: loc, Config: tier.Config{Dir: dir}})
	if err == nil {
		s.Close()
	}
	return err
}

// wantMisconfigured checks that err is an *tier.ErrMisconfigured saying what.
func wantMisconfigured(t *testing.T, err error, what string) {
	t.Helper()
	if _, ok := errors.AsType[*tier.ErrMisconfigured](err); !ok || !strings.Contains(err.Error(), what) {
		t.Fatalf("Open: %v; want it refused as misconfigured, naming %q", err, what)
	}
}

// A bucket that does not exist is a configuration error at start, not a
// tier whose every read is NOT_FOUND.
func TestOpenRefusesABucketThatDoesNotExist(t *testing.T) {
	isolateAWS(t, "key", "secret")
	s3 := newFakeS3(t)
	loc, err := ParseURL("s3://no-such-bucket/?endpoint=" + s3.srv.URL + "&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	wantMisconfigured(t, openFreshTier(t, loc), `bucket "no-such-bucket" does not exist`)
	if err := openFreshTier(t, s3.location("")); err != nil {
		t.Fatalf("Open of the bucket that exists: %v", err)
	}
}

// On a real MinIO: refused credentials and a missing bucket each stop
// Open with their cause.
func TestMinIOOpenRefusesAWrongConfiguration(t *testing.T) {
	m := miniotest.Start(t)
	isolateAWS(t, miniotest.AccessKey, "not-the-secret")
	loc, err := ParseURL(m.URL("startup"))
	if err != nil {
		t.Fatal(err)
	}
	wantMisconfigured(t, openFreshTier(t, loc), "credentials are refused")

	isolateAWS(t, miniotest.AccessKey, miniotest.SecretKey)
	missing, err := ParseURL(strings.Replace(m.URL("startup"), "s3://"+miniotest.Bucket+"/", "s3://absent/", 1))
	if err != nil {
		t.Fatal(err)
	}
	wantMisconfigured(t, openFreshTier(t, missing), `bucket "absent" does not exist`)
	if err := openFreshTier(t, loc); err != nil {
		t.Fatalf("Open with the right configuration: %v", err)
	}
}
