package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
)

// dashboardQueries returns every PromQL expression of the Grafana
// dashboard in deploy/grafana: the panels' targets and the template
// variables' queries.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/grafana/membuf.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deploy/grafana/membuf.json: %v", err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	return exprs
}

var (
	promString     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdentifier = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// promWords are PromQL's keywords, and Grafana's label_values.
	promWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "label_values", "instance"}
)

// metricNames returns the metric names expr queries: its identifiers once
// strings, label matchers, ranges and groupings are removed, other than
// functions (followed by a parenthesis), keywords and numbers.
func metricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promIdentifier.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if rest := strings.TrimLeft(s[loc[1]:], " "); strings.HasPrefix(rest, "(") || slices.Contains(promWords, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

// exportedNames returns the series names an exposition holds, from its
// TYPE lines: a histogram's _bucket, _sum and _count, a summary's _sum
// and _count, besides the family's name.
func exportedNames(exposition string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(exposition, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]+"_sum"], names[f[2]+"_count"] = true, true
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (le, operation) (rate(a_bucket{x="y{z}",instance=~"$instance"}[$__rate_interval]))) / ignoring(tier) group_left sum(b_total) + c`)
	if want := []string{"a_bucket", "b_total", "c"}; !slices.Equal(got, want) {
		t.Errorf("metricNames: %q; want %q", got, want)
	}
	if got := metricNames("label_values(membuf_store_bytes, instance)"); !slices.Equal(got, []string{"membuf_store_bytes"}) {
		t.Errorf("label_values: %q", got)
	}
}

// Every metric the dashboard queries is one a running membuf serve exports
// (with --http-cache and --upstream, so that every family exists: the
// bucket's endpoint answers nothing, which serve serves around), so that
// the dashboard cannot drift from the metrics; and docs/metrics.md has a
// row for every membuf_ metric it exports.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	tmp := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(tmp, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(tmp, "none"), "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	s := startServe(t, "--http-cache", "127.0.0.1:0", "--upstream", "s3://membuf-test/p?endpoint=http://127.0.0.1:1&region=us-east-1", "--upstream-timeout", "1s")
	// A request of each protocol: membuf_requests_total has a series per
	// method and code answered, none before.
	if _, err := repb.NewCapabilitiesClient(dial(t, s.grpcAddr)).GetCapabilities(context.Background(), &repb.GetCapabilitiesRequest{}); err != nil {
		t.Fatal(err)
	}
	httpDo(t, http.MethodGet, "http://"+s.httpCacheAddr+"/cas/"+strings.Repeat("0", 64), nil)
	exposition := httpGet(t, "http://"+s.httpAddr+"/metrics")
	exported := exportedNames(exposition)
	checkMetricsDoc(t, exposition)
	queried := map[string]bool{}
	for _, expr := range dashboardQueries(t) {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("query %q names no metric", expr)
		}
		for _, n := range names {
			queried[n] = true
			if !exported[n] {
				t.Errorf("the dashboard queries %s, which membuf serve does not export (query %q)", n, expr)
			}
		}
	}
	// What an operator needs the dashboard to show, each by a metric.
	for _, want := range []string{"membuf_requests_total", "membuf_store_hits_total", "membuf_request_duration_seconds_bucket",
		"membuf_http_cache_body_bytes_total", "membuf_store_bytes", "membuf_store_max_bytes", "membuf_store_evictions_total",
		"membuf_tier_upload_queue_length", "membuf_tier_uploads_total", "go_cpu_classes_gc_total_cpu_seconds_total", "process_resident_memory_bytes"} {
		if !queried[want] {
			t.Errorf("the dashboard does not query %s", want)
		}
	}
}

// checkMetricsDoc fails the test for each membuf_ metric family of
// exposition that docs/metrics.md does not name in a table row.
func checkMetricsDoc(t *testing.T, exposition string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(exposition, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" || !strings.HasPrefix(f[2], "membuf_") {
			continue
		}
		if !regexp.MustCompile("(?m)^\\| [^|]*`" + regexp.QuoteMeta(f[2]) + "[`{]").Match(doc) {
			t.Errorf("docs/metrics.md has no row for %s, which membuf serve exports", f[2])
		}
	}
}
