package interop

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/bazelbuild/remote-apis-sdks/go/pkg/digest"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"

	"github.com/membuf/membuf/internal/miniotest"
	"github.com/membuf/membuf/internal/serveprocess"
)

// TestTwoNodesShareABucket: two `membuf serve` processes with disks of
// their own and one MinIO bucket. A blob written through A is read through
// B, from the bucket the first time and from B's disk the second; an
// action result stored on A is a hit on B.
func TestTwoNodesShareABucket(t *testing.T) {
	ctx := testContext(t)
	m := miniotest.Start(t)
	node := func(extra ...string) *serveprocess.Process {
		cmd := exec.Command(binary(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
			"--dir", t.TempDir(), "--s3", m.URL("two-nodes") + "&packs=false"}, extra...)...)
		cmd.Env = append(os.Environ(), m.Env(t.TempDir())...)
		return serveprocess.StartTest(t, cmd)
	}
	a := node("--s3-write-through")
	b := node()
	ca := newClient(t, ctx, a.GRPCAddr, "")
	cb := newClient(t, ctx, b.GRPCAddr, "")

	blob := randomBlob(t, 5<<20+3)
	dg, err := ca.WriteBlob(ctx, blob)
	if err != nil {
		t.Fatal(err)
	}
	ad := digest.NewFromBlob([]byte("link the app"))
	ar := &repb.ActionResult{OutputFiles: []*repb.OutputFile{{Path: "app", Digest: dg.ToProto()}}}
	if _, err := ca.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: ad.ToProto(), ActionResult: ar}); err != nil {
		t.Fatal(err)
	}

	got, err := cb.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: ad.ToProto()})
	if err != nil || len(got.OutputFiles) != 1 || got.OutputFiles[0].Path != "app" {
		t.Fatalf("B's GetActionResult of A's result: %v, %v", got, err)
	}
	lookups := func() (s3, disk float64) {
		m := scrape(t, b.HTTPAddr)
		return metric(t, m, `membuf_tier_lookups_total{tier="shared"}`), metric(t, m, `membuf_tier_lookups_total{tier="local"}`)
	}
	for i, from := range []string{"s3", "disk"} {
		s3Before, diskBefore := lookups()
		data, _, err := cb.ReadBlob(ctx, dg)
		if err != nil || !bytes.Equal(data, blob) {
			t.Fatalf("read %d on B: %d bytes, %v", i+1, len(data), err)
		}
		s3After, diskAfter := lookups()
		if got := map[string]float64{"s3": s3After - s3Before, "disk": diskAfter - diskBefore}; got[from] != 1 || got["s3"]+got["disk"] != 1 {
			t.Fatalf("read %d on B was answered %v; want once from %s", i+1, got, from)
		}
		// One GET for the action result, one for the blob: the second
		// read sends none.
		if n := metric(t, scrape(t, b.HTTPAddr), `membuf_tier_requests_total{op="get",outcome="ok"}`); n != 2 {
			t.Fatalf("after read %d on B, %v GETs answered; want 2 (the action result and one fill)", i+1, n)
		}
	}
	if n := metric(t, scrape(t, b.HTTPAddr), `membuf_tier_fills_total{outcome="ok"}`); n != 1 {
		t.Fatalf("B filled %v blobs; want 1", n)
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// metric returns the value of the series named exactly name.
func metric(t *testing.T, exposition, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
