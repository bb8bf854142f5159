package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gradleInstall is how to get the Gradle these tests run: Debian's
// package, Gradle 4.4.1 on the default JDK (.ci/install-clients runs it).
const gradleInstall = "apt-get update && apt-get install -y gradle"

// gradleBinary returns the gradle on PATH. Without one the test fails,
// naming the command that installs it, unless -short skips the tests that
// start real clients.
func gradleBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a real Gradle")
	}
	path, err := exec.LookPath("gradle")
	if err != nil {
		t.Fatalf("no gradle on PATH: install Debian's Gradle 4.4.1 with `%s` (as root; .ci/install-clients does it), or run with -short", gradleInstall)
	}
	return path
}

// gradleSources are the Java classes of the test project.
const gradleSources = 3

// writeGradleProject writes a Java project whose settings point Gradle's
// HTTP build cache at url, as README's "ccache, sccache, Gradle: the HTTP cache"
// has it, with credentials if user is not empty; the local build cache is
// off, so that a hit can only come from membuf.
func writeGradleProject(t *testing.T, url, user, password string) string {
	t.Helper()
	dir := t.TempDir()
	creds := ""
	if user != "" {
		creds = fmt.Sprintf("\n        credentials {\n            username = '%s'\n            password = '%s'\n        }", user, password)
	}
	files := map[string]string{
		"settings.gradle": fmt.Sprintf("rootProject.name = 'interop'\nbuildCache {\n    local { enabled = false }\n    remote(HttpBuildCache) {\n        url = '%s'\n        push = true%s\n    }\n}\n", url, creds),
		"build.gradle":    "apply plugin: 'java'\n",
	}
	for i := range gradleSources {
		files[fmt.Sprintf("src/main/java/interop/C%d.java", i)] = fmt.Sprintf("package interop;\n\npublic class C%d {\n    public static int f(int x) { return x * %d + 1; }\n}\n", i, i+2)
	}
	writeFiles(t, dir, files)
	return dir
}

// gradleRun runs gradle in project without a daemon, its user home in
// home, the JVM given jvmOpts, and returns what it printed.
func gradleRun(t *testing.T, gradle, project, home string, jvmOpts []string, tasks ...string) string {
	t.Helper()
	cmd := exec.Command(gradle, append([]string{"--no-daemon", "--build-cache", "--console=plain", "--stacktrace"}, tasks...)...)
	cmd.Dir = project
	cmd.Env = append(os.Environ(), "GRADLE_USER_HOME="+home, "GRADLE_OPTS="+strings.Join(jvmOpts, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gradle %s: %v\n%s", strings.Join(tasks, " "), err, lastLines(string(out), 60))
	}
	return string(out)
}

// classFiles returns the compiled classes of project.
func classFiles(t *testing.T, project string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(project, "build", "classes", "java", "main", "interop", "*.class"))
	if err != nil {
		t.Fatal(err)
	}
	classes := make(map[string][]byte)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		classes[filepath.Base(f)] = data
	}
	if len(classes) != gradleSources {
		t.Fatalf("%d classes compiled, want %d", len(classes), gradleSources)
	}
	return classes
}

// TestGradleHTTPBuildCache: Gradle 4.4.1 with remote(HttpBuildCache) and
// url 'http://ADDR/gradle/' stores compileJava's outputs (PUT
// /gradle/{32 hex}), and after `clean` the task is FROM-CACHE, with the
// same classes. Then the same over HTTPS with credentials, the test's CA
// in a trust store the JVM is given.
func TestGradleHTTPBuildCache(t *testing.T) {
	gradle := gradleBinary(t)
	for _, tc := range []struct {
		name   string
		secure bool
	}{{"http", false}, {"https-basic-auth", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startHTTPCache(t, t.TempDir(), tc.secure)
			var user, password string
			var jvmOpts []string
			if tc.secure {
				user, password = secureUser, securePassword
				jvmOpts = []string{"-Djavax.net.ssl.trustStore=" + javaTrustStore(t, c.caFile), "-Djavax.net.ssl.trustStorePassword=interop"}
			}
			project := writeGradleProject(t, c.cacheURL("")+"/gradle/", user, password)
			home := t.TempDir()
			out := gradleRun(t, gradle, project, home, jvmOpts, "compileJava")
			if !strings.Contains(out, "\n:compileJava\n") {
				t.Fatalf("first build: compileJava did not run:\n%s", lastLines(out, 30))
			}
			built := classFiles(t, project)
			out = gradleRun(t, gradle, project, home, jvmOpts, "clean", "compileJava")
			if !strings.Contains(out, ":compileJava FROM-CACHE") {
				t.Fatalf("after clean: compileJava is not FROM-CACHE:\n%s\nmembuf's log (end):\n%s", lastLines(out, 30), lastLines(c.Log(), 20))
			}
			for name, data := range classFiles(t, project) {
				if string(built[name]) != string(data) {
					t.Errorf("%s from the cache differs from the one compiled", name)
				}
			}
		})
	}
}
