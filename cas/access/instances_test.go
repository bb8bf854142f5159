package access_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/access/accesstest"
)

const accessFile = `# instance   rules
team-a       read-ac=anyone write-ac=alice
"ci release" write-ac=bob
""           write-ac=nobody
`

// An instance the file names gets its rules for the operations it sets;
// every other instance and operation follows the Policy.
func TestAuthorizeInstanceFollowsTheAccessFile(t *testing.T) {
	users, err := access.LoadHtpasswd(accesstest.WriteHtpasswd(t, map[string]string{"alice": "a", "bob": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := access.ReadInstanceRules(strings.NewReader(accessFile))
	if err != nil {
		t.Fatal(err)
	}
	if rules.Len() != 3 || !rules.NeedsIdentity() {
		t.Fatalf("parsed %d instances (needs identity %v); want 3, true", rules.Len(), rules.NeedsIdentity())
	}
	c := &access.Control{Users: users, Instances: rules, Policy: access.Policy{ReadAC: access.Authenticated(), WriteAC: access.Authenticated()}}
	as := func(user string) access.Credentials {
		r := httptest.NewRequest(http.MethodGet, "/ac/x", nil)
		if user != "" {
			r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+user[:1])))
		}
		return access.HTTPCredentials(r)
	}
	for _, tc := range []struct {
		user, instance string
		op             access.Operation
		allowed        bool
	}{
		{"", "team-a", access.ReadAC, true},       // the file: anyone
		{"", "team-b", access.ReadAC, false},      // the policy: authenticated
		{"bob", "team-a", access.WriteAC, false},  // the file: alice only
		{"alice", "team-a", access.WriteAC, true}, //
		{"alice", "ci release", access.WriteAC, false},
		{"bob", "ci release", access.WriteAC, true},
		{"bob", "ci release", access.ReadAC, true}, // not set: the policy
		{"alice", "", access.WriteAC, false},       // the empty instance: nobody
		{"alice", "", access.ReadAC, true},
	} {
		_, denied := c.AuthorizeInstance(as(tc.user), tc.instance, tc.op)
		if (denied == nil) != tc.allowed {
			t.Errorf("%q on %q, %s: denial %v; want allowed %v", tc.user, tc.instance, tc.op, denied, tc.allowed)
		}
		id, _ := c.Identify(as(tc.user))
		if got := c.AllowsInstance(tc.instance, tc.op, id); got != tc.allowed {
			t.Errorf("AllowsInstance(%q, %s, %q) = %v; Authorize said %v", tc.instance, tc.op, tc.user, got, tc.allowed)
		}
		if denied != nil && denied.Reason == access.NotPermitted && !strings.Contains(denied.Error(), "instance") {
			t.Errorf("denial %q does not name the instance", denied.Error())
		}
	}
}

func TestReadInstanceRulesNamesTheBadLine(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"a read-ac=anyone\na write-ac=x\n", "line 2: instance \"a\" is named twice"},
		{"a\n", "line 1: instance \"a\": no rules"},
		{"a read-cas=anyone\n", "the CAS is shared"},
		{"a delete=x\n", "unknown operation"},
		{"a read-ac\n", "want read-ac=WHO"},
		{"a read-ac=x read-ac=y\n", "given twice"},
		{"a read-ac=,\n", "read-ac"},
		{"\"open read-ac=x\n", "quoted string"},
	} {
		_, err := access.ReadInstanceRules(strings.NewReader(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.file, err, tc.want)
		}
	}
}

// Whatever the file holds, ReadInstanceRules parses it or names a line,
// never panics, and what it parses it parses again the same.
func FuzzReadInstanceRules(f *testing.F) {
	f.Add(accessFile)
	f.Add("\"\\x00\" read-ac=a,b\n# c\n\n")
	f.Add("nightly ac-max-age=24h\n/nx ac-max-age=0 write-ac=ci\n")
	f.Fuzz(func(t *testing.T, file string) {
		rules, err := access.ReadInstanceRules(strings.NewReader(file))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") && !strings.Contains(err.Error(), "token too long") {
				t.Fatalf("error %q names no line", err)
			}
			return
		}
		again, err := access.ReadInstanceRules(strings.NewReader(file))
		if err != nil || again.Len() != rules.Len() {
			t.Fatalf("parsed %d instances, then %d (%v)", rules.Len(), again.Len(), err)
		}
	})
}

// ac-max-age= sets an instance's (or a namespace's) own age limit for its
// action results, alone on a line or beside its rules; 0 is one that lets
// none expire. An instance without it follows --ac-max-age.
func TestInstanceACMaxAge(t *testing.T) {
	rules, err := access.ReadInstanceRules(strings.NewReader(`
nightly   ac-max-age=24h
team-a    read-ac=anyone ac-max-age=0
/gradle   write-ac=ci ac-max-age=168h
team-b    read-ac=anyone
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		instance string
		age      time.Duration
		set      bool
	}{
		{"nightly", 24 * time.Hour, true},
		{"team-a", 0, true},
		{"/gradle", 168 * time.Hour, true},
		{"team-b", 0, false},
		{"unnamed", 0, false},
	} {
		if age, set := rules.ACMaxAge(c.instance); age != c.age || set != c.set {
			t.Errorf("ACMaxAge(%q) = %v, %v; want %v, %v", c.instance, age, set, c.age, c.set)
		}
	}
	if !rules.SetsACMaxAge() {
		t.Error("SetsACMaxAge is false for a file that sets it")
	}
	for file, want := range map[string]string{
		"x ac-max-age=-1s":              "want a duration of 0 or more",
		"x ac-max-age=soon":             "want a duration of 0 or more",
		"x ac-max-age=1h ac-max-age=2h": "ac-max-age given twice",
		"x ac-max-age":                  "want read-ac=WHO, write-ac=WHO or ac-max-age=DURATION",
		"x max-age=1h":                  "want read-ac, write-ac or ac-max-age",
	} {
		if _, err := access.ReadInstanceRules(strings.NewReader(file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error saying %q", file, err, want)
		}
	}
}

// Reload puts a changed file's rules in force whole; a file that does not
// load, or names authenticated clients where no one can be one, leaves
// the rules in force.
func TestInstanceRulesReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("team-a write-ac=nobody\n")
	rules, err := access.LoadInstanceRules(path)
	if err != nil {
		t.Fatal(err)
	}
	c := &access.Control{Instances: rules, Policy: access.Policy{WriteAC: access.Anyone()}}
	may := func(instance string) bool { return c.AllowsInstance(instance, access.WriteAC, access.Identity{}) }
	if may("team-a") || !may("team-b") {
		t.Fatal("the file's rules are not in force")
	}
	write("team-b write-ac=nobody\n")
	if err := rules.Reload(false); err != nil {
		t.Fatal(err)
	}
	if !may("team-a") || may("team-b") {
		t.Fatal("after Reload, the new file's rules are not in force")
	}
	for _, bad := range []string{"team-c write-ac\n", "team-c write-ac=alice\n"} {
		write(bad)
		if err := rules.Reload(false); err == nil {
			t.Errorf("Reload of %q succeeded", bad)
		}
		if may("team-b") || rules.Len() != 1 {
			t.Errorf("a failed Reload (%q) changed the rules in force", bad)
		}
	}
}
