package interop

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mavenTools returns Maven 3.9.16 and the local repository holding what
// testdata/maven's project and the build cache extension need, both made
// by .ci/install-monorepo-clients: the build runs offline.
func mavenTools(t *testing.T) (mvn, repo string) {
	mvn = monorepoTool(t, "maven-3.9.16/bin/mvn")
	repo = monorepoTool(t, "maven-repo")
	monorepoTool(t, "maven-repo/.membuf-stamp") // filled whole
	lookPathOrFail(t, "java", monorepoInstall+" (Maven needs a JDK 17: apt-get install -y openjdk-17-jdk-headless)")
	return mvn, repo
}

// mavenRestored matches the build cache extension's line for a module it
// restored from the cache instead of building.
var mavenRestored = regexp.MustCompile(`Found cached build, restoring example\.membuf:(lib|app) from cache`)

// TestMavenBuildCacheRemote: the Maven build cache extension, its remote
// cache the keyed namespace /maven/ (GET, HEAD and PUT through Maven's
// resolver transport, basic credentials from settings.xml): a two-module
// project built from a clean clone saves both modules; a second clean
// clone, its local cache empty, downloads them and restores both, running
// none of their plugins; and pr, who may only read, restores but cannot
// save.
func TestMavenBuildCacheRemote(t *testing.T) {
	mvn, repo := mavenTools(t)
	srv := startMonorepoCache(t)
	url := "http://" + srv.HTTPCacheAddr + "/maven"
	clone := cloneTemplate(t, "maven")
	build := func(dir, user, password string) string {
		t.Helper()
		settings := filepath.Join(dir, "settings.xml")
		writeFile(t, settings, "<settings><servers><server><id>membuf</id><username>"+user+"</username><password>"+password+"</password></server></servers></settings>\n")
		return runTool(t, dir, nil, mvn, "-o", "-B", "-s", settings, "-Dmaven.repo.local="+repo,
			"-Dmaven.build.cache.location="+filepath.Join(dir, ".build-cache"),
			"-Dmaven.build.cache.remote.url="+url, "-Dmaven.build.cache.remote.save.enabled=true", "package")
	}

	first := build(clone(), ciUser, ciPassword)
	if n := len(mavenRestored.FindAllString(first, -1)); n != 0 || strings.Count(first, "Saved to remote cache") < 4 {
		t.Fatalf("the first clone restored %d modules, or saved fewer than 4 files; its output:\n%s", n, first)
	}
	second := clone()
	out := build(second, prUser, prPassword)
	if got := mavenRestored.FindAllStringSubmatch(out, -1); len(got) != 2 || !strings.Contains(out, "Build info downloaded from remote repo") {
		t.Fatalf("the second clone restored %d modules from the remote cache, want lib and app; its output:\n%s", len(got), out)
	}
	if strings.Contains(out, "Compiling ") {
		t.Errorf("the second clone compiled; its output:\n%s", out)
	}
	for _, m := range []string{"lib", "app"} {
		if fi, err := os.Stat(filepath.Join(second, m, "target", m+"-1.0.jar")); err != nil || fi.Size() == 0 {
			t.Errorf("module %s's jar after the restore: %v", m, err)
		}
	}
	// pr's build saved nothing: its attempt (the cache report) was refused.
	if strings.Contains(out, "Saved to remote cache") {
		t.Errorf("a build with the read-only user saved to the remote cache; its output:\n%s", out)
	}
}
