package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveFlagSet returns membuf serve's flags parsed from args.
func serveFlagSet(t *testing.T, args ...string) *flag.FlagSet {
	t.Helper()
	fs, _ := serveFlags(&stdio{out: &strings.Builder{}, err: &strings.Builder{}})
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

// writeConfig writes text to a TOML file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "membuf.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// env is a lookup over a fixed environment.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// The command line wins over the environment, which wins over the file;
// the file and the environment fill what the others leave; arrays are
// list flags.
func TestSettingSourcesPrecedence(t *testing.T) {
	path := writeConfig(t, `
max-size = "3GiB"
scrub-rate = "1MiB"
pack-sync = "200ms"
check-reads = false
max-connections = 7
`)
	fs := serveFlagSet(t, "--pack-sync", "400ms", "--config", path)
	from, err := applySettingSources(fs, env(map[string]string{
		"MEMBUF_SCRUB_RATE": "2MiB",
		"MEMBUF_PACK_SYNC":  "300ms",
		"MEMBUF_DEBUG":      "1", // not a flag: left alone
	}))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{
		"pack-sync":       {"400ms", "flag"},
		"scrub-rate":      {"2MiB", "env MEMBUF_SCRUB_RATE"},
		"max-size":        {"3GiB", "file " + path},
		"check-reads":     {"false", "file " + path},
		"max-connections": {"7", "file " + path},
	} {
		if got := fs.Lookup(name).Value.String(); got != want[0] || from[name] != want[1] {
			t.Errorf("--%s = %s from %q; want %s from %q", name, got, from[name], want[0], want[1])
		}
	}
	if _, ok := from["listen"]; ok {
		t.Error("--listen, set nowhere, has a source")
	}
	attrs := settingSourcesLog(from)
	want := []any{"flag", "config pack-sync", "env", "MEMBUF_SCRUB_RATE", "file", path + ": check-reads max-connections max-size"}
	if len(attrs) != len(want) {
		t.Fatalf("start-up attributes %q, want %q", attrs, want)
	}
	for i := range want {
		if attrs[i] != want[i] {
			t.Fatalf("start-up attributes %q, want %q", attrs, want)
		}
	}
}

// MEMBUF_CONFIG names the file when --config does not.
func TestSettingSourcesConfigFromTheEnvironment(t *testing.T) {
	path := writeConfig(t, `max-size = "5GiB"`)
	fs := serveFlagSet(t)
	if _, err := applySettingSources(fs, env(map[string]string{"MEMBUF_CONFIG": path})); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("max-size").Value.String(); got != "5GiB" {
		t.Fatalf("--max-size %s, want the file's 5GiB", got)
	}
}

// Every mistake is a usage error that names it.
func TestSettingSourcesErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", `max-sise = "1GiB"`, nil, `unknown key "max-sise"`},
		{"bad value", `max-size = "lots"`, nil, `key "max-size" = "lots"`},
		{"table", "[s3]\nbucket = \"x\"", nil, `key "s3": a table`},
		{"not TOML", `max-size = `, nil, "not TOML"},
		{"nested config", `config = "other.toml"`, nil, `key "config"`},
		{"bad environment", ``, map[string]string{"MEMBUF_PACK_SYNC": "soon"}, `MEMBUF_PACK_SYNC="soon": want a duration`},
		{"bad boolean in the environment", ``, map[string]string{"MEMBUF_CHECK_READS": "maybe"}, `MEMBUF_CHECK_READS="maybe": want true or false`},
		{"bad boolean in the file", `check-reads = "maybe"`, nil, `key "check-reads" = "maybe": want true or false`},
		{"misspelled key", `max-sizes = "1GiB"`, nil, `unknown key "max-sizes": not a flag of membuf serve (did you mean "max-size"?)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := serveFlagSet(t, "--config", writeConfig(t, tc.file))
			_, err := applySettingSources(fs, env(tc.env))
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want a usage error naming %s", err, tc.want)
			}
		})
	}
	fs := serveFlagSet(t, "--config", filepath.Join(t.TempDir(), "missing.toml"))
	if _, err := applySettingSources(fs, env(nil)); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Fatalf("a missing file: %v", err)
	}
}

// A MEMBUF_ variable that names no flag is a usage error naming it and the
// variable probably meant, as an unknown config key is; membuf's own other
// variables and the tests' are left alone.
func TestCheckMembufEnv(t *testing.T) {
	fs := serveFlagSet(t)
	ok := []string{"PATH=/bin", "MEMBUF_MAX_SIZE=1G", "MEMBUF_CONFIG=x.toml", "MEMBUF_DEBUG=1", "MEMBUF_MINIO=/bin/minio", "MEMBUF_FAKEGCS=/bin/fake-gcs-server", "MEMBUF_AZURITE=/bin/azurite-blob",
		"MEMBUF_TOOLS=/tmp", "MEMBUF_TEST_RUN_MAIN=1", "MEMBUF_CAS_CRASH_DIR=/tmp", "MEMBUF_BENCH_SERVE=membuf", "NOT_MEMBUF_X=1"}
	if err := checkMembufEnv(fs, ok); err != nil {
		t.Fatalf("%q: %v", ok, err)
	}
	for _, tc := range []struct{ env, want string }{
		{"MEMBUF_MAX_SIZ=1G", "environment variable MEMBUF_MAX_SIZ is not a setting of membuf serve (did you mean MEMBUF_MAX_SIZE?)"},
		{"MEMBUF_SCRUBRATE=1M", "(did you mean MEMBUF_SCRUB_RATE?)"},
		{"MEMBUF_CACHE_SIZE=1G", "MEMBUF_CACHE_SIZE is not a setting of membuf serve; every flag of membuf serve can be set as MEMBUF_<FLAG>"},
		{"MEMBUF_=", "MEMBUF_ is not a setting"},
	} {
		err := checkMembufEnv(fs, append(ok, tc.env))
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want a usage error saying %q", tc.env, err, tc.want)
		}
	}
}

// As the binary runs it: a bad key stops serve with exit status 2 before
// anything starts, and a good file's settings reach the start-up line.
func TestServeConfigFile(t *testing.T) {
	bad := writeConfig(t, `scrub-rates = "1MiB"`)
	code, _, errOut := runCLI(t, context.Background(), "serve", "--config", bad, "--dir", t.TempDir())
	if code != 2 || !strings.Contains(errOut, `unknown key "scrub-rates"`) {
		t.Fatalf("serve with an unknown key: exit %d\n%s", code, errOut)
	}
	t.Setenv("MEMBUF_SCRUB_RAT", "1MiB")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a serve that starts stops
	defer cancel()
	code, _, errOut = runCLI(t, ctx, "serve", "--dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "")
	if code != 2 || !strings.Contains(errOut, "MEMBUF_SCRUB_RAT is not a setting of membuf serve (did you mean MEMBUF_SCRUB_RATE?)") {
		t.Fatalf("serve with a misspelled MEMBUF_ variable: exit %d\n%s", code, errOut)
	}
	os.Unsetenv("MEMBUF_SCRUB_RAT") // t.Setenv restores what was there before the test at its end
	s := startServe(t, "--config", writeConfig(t, `scrub-rate = "1MiB"`))
	_, _, errOut = s.stop()
	if !strings.Contains(errOut, "scrub-rate") || !strings.Contains(errOut, "file=") {
		t.Fatalf("the start-up line does not say the file set scrub-rate:\n%s", errOut)
	}
}

// Whatever a config file holds, reading it returns settings or an error
// that names the file, never a panic, and a file it accepts sets only
// flags serve has.
// The seed corpus is in testdata/fuzz/FuzzConfigFile.
func FuzzConfigFile(f *testing.F) {
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		path := filepath.Join(dir, "fuzz.toml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := serveFlagSet(t, "--config", path)
		from, err := applySettingSources(fs, env(nil))
		if err != nil {
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v: want a usage error naming the file", err)
			}
			return
		}
		for name := range from {
			if fs.Lookup(name) == nil {
				t.Fatalf("set %q, not a flag", name)
			}
		}
	})
}
