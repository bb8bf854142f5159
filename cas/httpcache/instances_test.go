package httpcache_test

import (
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/actionresult"
	"github.com/membuf/membuf/cas/httpcache"
	"google.golang.org/protobuf/proto"
)

// With InstanceIsolation, /{instance}/ac/{hash} is that instance's entry
// alone, kept under gRPC's key for it; /cas/ is shared by every prefix.
// The access file's rules for an instance govern its /ac/.
func TestInstanceIsolationOverHTTP(t *testing.T) {
	rules, err := access.ReadInstanceRules(strings.NewReader("locked write-ac=nobody\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, httpcache.Options{InstanceIsolation: true, Access: &access.Control{
		Policy:    access.Policy{ReadCAS: access.Anyone(), WriteCAS: access.Anyone(), ReadAC: access.Anyone(), WriteAC: access.Anyone()},
		Instances: rules,
	}})
	out := []byte("an output")
	od := cas.DigestOf(out)
	c.want(200, "PUT", "/team-a/cas/"+od.Hash, out)
	c.want(200, "GET", "/team-b/cas/"+od.Hash, nil) // content is content
	action := cas.DigestOf([]byte("action"))
	ar := marshal(t, &repb.ActionResult{ExitCode: 4, OutputFiles: []*repb.OutputFile{{Path: "o", Digest: od.Proto()}}})
	c.want(200, "PUT", "/team-a/ac/"+action.Hash, ar)
	got := &repb.ActionResult{}
	if err := proto.Unmarshal(c.want(200, "GET", "/team-a/ac/"+action.Hash, nil), got); err != nil || got.ExitCode != 4 {
		t.Fatalf("own instance: %v, %v", got, err)
	}
	c.want(404, "GET", "/team-b/ac/"+action.Hash, nil)
	c.want(404, "GET", "/ac/"+action.Hash, nil)
	c.want(200, "HEAD", "/team-a/ac/"+action.Hash, nil)
	if _, err := c.store.GetActionResult(t.Context(), actionresult.InstanceKey("team-a", action), cas.ClientLookup); err != nil {
		t.Errorf("not kept under gRPC's key for the instance: %v", err)
	}
	c.want(401, "PUT", "/locked/ac/"+action.Hash, ar)
	c.want(200, "PUT", "/open/ac/"+action.Hash, ar)
}

// A client of one instance, the empty one included, that names another
// instance's key as its action reaches an entry of its own: it neither
// reads nor replaces the other instance's result, though anyone can
// compute that key.
func TestInstanceKeysAreNotReachableThroughAnotherInstanceOverHTTP(t *testing.T) {
	all := access.Anyone()
	c := newCache(t, httpcache.Options{InstanceIsolation: true, Access: &access.Control{
		Policy: access.Policy{ReadCAS: all, WriteCAS: all, ReadAC: all, WriteAC: all},
	}})
	out := []byte("team-a's output")
	od := cas.DigestOf(out)
	c.want(200, "PUT", "/cas/"+od.Hash, out)
	action := cas.DigestOf([]byte("team-a's action"))
	c.want(200, "PUT", "/team-a/ac/"+action.Hash, marshal(t, &repb.ActionResult{ExitCode: 4, OutputFiles: []*repb.OutputFile{{Path: "o", Digest: od.Proto()}}}))
	key := actionresult.InstanceKey("team-a", action).Hash
	planted := marshal(t, &repb.ActionResult{ExitCode: 66, OutputFiles: []*repb.OutputFile{{Path: "o", Digest: od.Proto()}}})
	for _, through := range []string{"", "/team-b", "/team-a"} {
		c.want(404, "GET", through+"/ac/"+key, nil)
		c.want(200, "PUT", through+"/ac/"+key, planted)
	}
	got := &repb.ActionResult{}
	if err := proto.Unmarshal(c.want(200, "GET", "/team-a/ac/"+action.Hash, nil), got); err != nil || got.ExitCode != 4 {
		t.Fatalf("team-a's result after others wrote its key: %v, %v; want exit code 4", got, err)
	}
}

// A GET of a result whose output directory's Tree names a missing file
// is a 404 saying it is incomplete.
func TestIncompleteTreeIsAMissOverHTTP(t *testing.T) {
	c := newCache(t, httpcache.Options{})
	missing := cas.DigestOf([]byte("never uploaded"))
	tree, err := proto.Marshal(&repb.Tree{Root: &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: missing.Proto()}}}})
	if err != nil {
		t.Fatal(err)
	}
	td := cas.DigestOf(tree)
	c.want(200, "PUT", "/cas/"+td.Hash, tree)
	action := cas.DigestOf([]byte("tree action")).Hash
	c.want(200, "PUT", "/ac/"+action, marshal(t, &repb.ActionResult{OutputDirectories: []*repb.OutputDirectory{{Path: "d", TreeDigest: td.Proto()}}}))
	if body := c.want(404, "GET", "/ac/"+action, nil); !strings.Contains(string(body), "incomplete") {
		t.Errorf("incomplete result: %q", body)
	}
}
