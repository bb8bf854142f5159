package interop

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/membuf/membuf/internal/serveprocess"
	"github.com/membuf/membuf/internal/testpki"
)

// httpCache is `membuf serve` with its HTTP cache listener on, as its HTTP
// clients see it.
type httpCache struct {
	*serveprocess.Process
	caFile string // the CA that signed its certificate; "" without TLS
}

// startHTTPCache runs `membuf serve --http-cache` on free loopback ports
// with its store in dir. secure adds TLS (a CA and certificate made for the
// test) and the secure topology's user, who alone may write.
func startHTTPCache(t *testing.T, dir string, secure bool, extra ...string) *httpCache {
	t.Helper()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--http", "", "--http-cache", "127.0.0.1:0", "--dir", dir, "--log-level", "debug"}
	c := &httpCache{}
	if secure {
		pkiDir := t.TempDir()
		ca := testpki.NewCA(t, "interop CA")
		certFile, keyFile := ca.Server(t).WriteFiles(t, pkiDir, "server")
		c.caFile = ca.WriteFile(t, pkiDir, "ca")
		htpasswd := filepath.Join(pkiDir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(secureUser+":"+secureHash+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--tls-cert", certFile, "--tls-key", keyFile, "--htpasswd", htpasswd,
			"--read-cas", "authenticated", "--read-ac", "authenticated", "--write-cas", secureUser, "--write-ac", secureUser)
	}
	c.Process = serveprocess.StartTest(t, exec.Command(binary(t), append(args, extra...)...))
	if c.HTTPCacheAddr == "" {
		t.Fatalf("serve names no http-cache address; its log:\n%s", c.Log())
	}
	return c
}

// cacheURL is the HTTP cache's base URL, with credentials if given, and
// with TLS the name its certificate is for.
func (c *httpCache) cacheURL(userinfo string) string {
	scheme, host := "http", c.HTTPCacheAddr
	if c.caFile != "" {
		_, port, _ := net.SplitHostPort(host)
		scheme, host = "https", "localhost:"+port
	}
	if userinfo != "" {
		userinfo += "@"
	}
	return scheme + "://" + userinfo + host
}

// TestBazelHTTPRemoteCache: Bazel 4.2.3 with --remote_cache=http:// stores
// every output and action result (checked ActionResult messages under
// /ac/), and after `bazel clean` every action is a remote cache hit; then
// the same over HTTPS with basic auth.
func TestBazelHTTPRemoteCache(t *testing.T) {
	bazel := bazelBinary(t)
	t.Run("http", func(t *testing.T) {
		c := startHTTPCache(t, t.TempDir(), false)
		bazelBuildCleanRebuild(t, bazel, nil, "--remote_cache="+c.cacheURL("")+"/main-instance")
	})
	t.Run("https-basic-auth", func(t *testing.T) {
		c := startHTTPCache(t, t.TempDir(), true)
		// Bazel 4's HTTP cache client ignores --tls_certificate (only its
		// gRPC client reads it): it trusts what its JVM trusts, so the
		// test's CA goes into a trust store of the JVM's own.
		trust := javaTrustStore(t, c.caFile)
		bazelBuildCleanRebuild(t, bazel, []string{"--host_jvm_args=-Djavax.net.ssl.trustStore=" + trust, "--host_jvm_args=-Djavax.net.ssl.trustStorePassword=interop"},
			"--remote_cache="+c.cacheURL(secureUser+":"+securePassword))
	})
}

// javaTrustStore writes a PKCS 12 trust store holding the CA in caFile,
// with keytool (the JDK's; Bazel's package depends on one), password
// "interop".
func javaTrustStore(t *testing.T, caFile string) string {
	t.Helper()
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		t.Fatalf("no keytool on PATH (the JDK's, which Debian's bazel-bootstrap depends on): `apt-get install -y default-jdk-headless`")
	}
	store := filepath.Join(t.TempDir(), "trust.p12")
	out, err := exec.Command(keytool, "-importcert", "-noprompt", "-alias", "interop-ca", "-file", caFile,
		"-keystore", store, "-storetype", "PKCS12", "-storepass", "interop").CombinedOutput()
	if err != nil {
		t.Fatalf("keytool -importcert: %v\n%s", err, out)
	}
	return store
}

// ccacheInstall is how to get the ccache these tests run: Debian's
// package (.ci/install-clients runs it).
const ccacheInstall = "apt-get update && apt-get install -y ccache"

// ccacheBinary returns the ccache and the C compiler on PATH. Without them
// the test fails naming the command that installs them, unless -short
// skips the tests that start real clients.
func ccacheBinary(t *testing.T) (ccache, cc string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real ccache")
	}
	ccache, err := exec.LookPath("ccache")
	if err != nil {
		t.Fatalf("no ccache on PATH: install Debian's with `%s` (as root), or run with -short", ccacheInstall)
	}
	cc, err = exec.LookPath("cc")
	if err != nil {
		t.Fatalf("no C compiler (cc) on PATH for ccache to wrap: `apt-get install -y gcc`")
	}
	return ccache, cc
}

// ccacheSources is how many C files the test project has.
const ccacheSources = 6

// writeCProject writes a small C project: ccacheSources files, one of
// them large enough that its object is past membuf's --pack-max.
func writeCProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i := range ccacheSources {
		var src strings.Builder
		fmt.Fprintf(&src, "#include <stdio.h>\nint f%d(int x) { return x * %d + 1; }\n", i, i+2)
		if i == 0 {
			// A table of some 200 KiB of initialized data: a large object.
			src.WriteString("const unsigned int table[50000] = {")
			for j := range 50000 {
				fmt.Fprintf(&src, "%d,", j*2654435761%4294967291)
			}
			src.WriteString("};\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.c", i)), []byte(src.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ccacheCompile compiles every file of the project in src through ccache,
// with its local cache in cacheDir and remote storage at remote, and
// returns the objects and ccache's statistics.
func ccacheCompile(t *testing.T, ccache, cc, src, cacheDir, remote string) (map[string][]byte, map[string]int) {
	t.Helper()
	env := append(os.Environ(), "CCACHE_DIR="+cacheDir, "CCACHE_REMOTE_STORAGE="+remote, "CCACHE_CONFIGPATH="+filepath.Join(cacheDir, "ccache.conf"))
	objects := make(map[string][]byte)
	for i := range ccacheSources {
		obj := fmt.Sprintf("f%d.o", i)
		os.Remove(filepath.Join(src, obj))
		cmd := exec.Command(ccache, cc, "-O1", "-c", fmt.Sprintf("f%d.c", i), "-o", obj)
		cmd.Dir, cmd.Env = src, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ccache %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
		}
		data, err := os.ReadFile(filepath.Join(src, obj))
		if err != nil {
			t.Fatal(err)
		}
		objects[obj] = data
	}
	cmd := exec.Command(ccache, "--print-stats")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ccache --print-stats: %v", err)
	}
	return objects, parseCcacheStats(t, string(out))
}

// ccacheStat is a line of `ccache --print-stats`: a name, a tab, a count.
var ccacheStat = regexp.MustCompile(`(?m)^(\w+)\t(\d+)$`)

func parseCcacheStats(t *testing.T, out string) map[string]int {
	t.Helper()
	stats := make(map[string]int)
	for _, m := range ccacheStat.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		stats[m[1]] = n
	}
	if _, ok := stats["remote_storage_hit"]; !ok {
		t.Fatalf("ccache --print-stats has no remote_storage_hit:\n%s", out)
	}
	return stats
}

// TestCcacheRemoteStorage: ccache 4.7 (Debian's) compiles a small C
// project with membuf as its remote storage (layout=bazel, its own entry
// format under /ac/, so --http-ac-raw); with its local cache emptied, every
// object comes back as a remote hit, the same bytes. Then the same with
// basic auth over HTTPS: ccache does no HTTPS itself (its manual says to
// put a TLS-terminating proxy in front), so it talks to a local proxy that
// forwards over TLS, the test's CA trusted, as a user would deploy it.
func TestCcacheRemoteStorage(t *testing.T) {
	ccache, cc := ccacheBinary(t)
	for _, tc := range []struct {
		name   string
		secure bool
	}{{"http", false}, {"https-basic-auth-through-a-tls-proxy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startHTTPCache(t, t.TempDir(), tc.secure, "--http-ac-raw")
			base := c.cacheURL("")
			if tc.secure {
				base = "http://" + secureUser + ":" + securePassword + "@" + tlsProxy(t, c)
			}
			remote := base + "/|layout=bazel"
			src := writeCProject(t)
			built, stats := ccacheCompile(t, ccache, cc, src, t.TempDir(), remote)
			if stats["remote_storage_hit"] != 0 || stats["remote_storage_error"] != 0 {
				t.Fatalf("first compile against an empty cache: %v", stats)
			}
			again, stats := ccacheCompile(t, ccache, cc, src, t.TempDir(), remote) // an empty local cache
			hits := stats["direct_cache_hit"] + stats["preprocessed_cache_hit"]
			if hits != ccacheSources || stats["remote_storage_hit"] < ccacheSources || stats["remote_storage_error"] != 0 || stats["cache_miss"] != 0 {
				t.Fatalf("compile with an empty local cache: %d cache hits, %d remote storage hits, %d errors, %d misses; want all %d objects from remote storage (%v)",
					hits, stats["remote_storage_hit"], stats["remote_storage_error"], stats["cache_miss"], ccacheSources, stats)
			}
			t.Logf("with an empty local cache: %d of %d objects hit, %d remote storage hits", hits, ccacheSources, stats["remote_storage_hit"])
			for obj, data := range built {
				if string(again[obj]) != string(data) {
					t.Fatalf("%s from the cache differs from the one compiled", obj)
				}
			}
		})
	}
}

// tlsProxy serves plain HTTP on a free loopback port and forwards every
// request to c's HTTPS listener, trusting c's CA: the TLS-terminating proxy
// ccache's manual recommends. It returns its address.
func tlsProxy(t *testing.T, c *httpCache) string {
	t.Helper()
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("the test CA's file holds no certificate")
	}
	target, err := url.Parse(c.cacheURL(""))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().String()
}
