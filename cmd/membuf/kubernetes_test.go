package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// configMapTOML returns the membuf.toml of each ConfigMap under
// deploy/kubernetes, by file: the lines of its block scalar
// ("membuf.toml: |"), their indentation removed.
func configMapTOML(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../deploy/kubernetes/*/*.yaml")
	out := map[string]string{}
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			if strings.TrimSpace(l) != "membuf.toml: |" {
				continue
			}
			indent := ""
			var b strings.Builder
			for _, body := range lines[i+1:] {
				if strings.TrimSpace(body) == "" {
					b.WriteString("\n")
					continue
				}
				if indent == "" {
					indent = body[:len(body)-len(strings.TrimLeft(body, " "))]
				}
				if !strings.HasPrefix(body, indent) {
					break
				}
				b.WriteString(strings.TrimPrefix(body, indent) + "\n")
			}
			out[f] = b.String()
		}
	}
	return out
}

var tomlDuration = regexp.MustCompile(`(?m)^(drain-delay|shutdown-timeout) = "([^"]+)"$`)

// Every ConfigMap's membuf.toml under deploy/kubernetes is accepted by
// membuf serve, which starts with it and stops cleanly (its addresses,
// directory and bucket replaced with the test's: what the file says of
// them is checked, not used); and the StatefulSet beside it gives the
// drain (--drain-delay, then --shutdown-timeout) time to finish within
// terminationGracePeriodSeconds.
func TestKubernetesConfigMaps(t *testing.T) {
	configs := configMapTOML(t)
	if len(configs) < 2 {
		t.Fatalf("found the membuf.toml of %d ConfigMaps under deploy/kubernetes; want the single node's and the fleet's", len(configs))
	}
	for file, toml := range configs {
		t.Run(filepath.Base(filepath.Dir(file))+"/"+filepath.Base(file), func(t *testing.T) {
			path := writeConfig(t, toml)
			s := startServe(t, "--config", path, "--http-cache", "127.0.0.1:0", "--upstream", "", "--dir", filepath.Join(t.TempDir(), "data"))
			code, _, errOut := s.stop()
			if code != 0 {
				t.Fatalf("serve with %s's membuf.toml exited %d:\n%s", file, code, errOut)
			}
			if !strings.Contains(errOut, `"file":`) || !strings.Contains(errOut, "max-blob-size") {
				t.Errorf("the settings line does not name the file's settings:\n%s", errOut)
			}
			var drain time.Duration
			for _, m := range tomlDuration.FindAllStringSubmatch(toml, -1) {
				d, err := time.ParseDuration(m[2])
				if err != nil {
					t.Fatal(err)
				}
				drain += d
			}
			sts, err := os.ReadFile(filepath.Join(filepath.Dir(file), "statefulset.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`terminationGracePeriodSeconds: (\d+)`).FindSubmatch(sts)
			if m == nil {
				t.Fatalf("%s sets no terminationGracePeriodSeconds", filepath.Join(filepath.Dir(file), "statefulset.yaml"))
			}
			grace, _ := strconv.Atoi(string(m[1]))
			if drain == 0 || time.Duration(grace)*time.Second < drain+5*time.Second {
				t.Errorf("terminationGracePeriodSeconds %d does not cover drain-delay + shutdown-timeout (%v) and 5 s to close the store", grace, drain)
			}
		})
	}
}
