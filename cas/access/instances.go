package access

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// InstanceRules are an access file's: per instance name, who may read and
// who may write that instance's action cache, in place of the Policy's
// ReadAC and WriteAC rules. They mean something only when action results
// are kept by instance (membuf serve --instance-isolation); the CAS is
// shared by every instance, so its rules stay the Policy's.
//
// The file has a line per instance: its name (quoted as a Go string if
// empty or holding spaces: "" is the empty instance), then read-ac=RULE,
// write-ac=RULE or both, each RULE as ParseRule reads it. An operation a
// line does not set, and an instance no line names, follow the Policy.
// Blank lines and lines starting with # are ignored.
//
// A line may also set ac-max-age=DURATION (168h, 90m; 0: none): how old
// the instance's action results may be before they are misses, in place
// of membuf serve's --ac-max-age (ACMaxAge).
//
// A name starting with a slash, /NAMESPACE, names a keyed namespace of
// the HTTP cache instead (/gradle, /turbo, /nx, /maven: entries a client
// names by a key of its own), read and written as the action cache is, so
// with the same two operations; these rules hold whether or not action
// results are kept by instance (AuthorizeNamespace).
//
//	# instance   rules
//	team-a       read-ac=anyone write-ac=alice,bob
//	ci/release   write-ac=release-bot
//	""           write-ac=nobody
//	/nx          read-ac=ci,pr write-ac=ci
//	nightly      ac-max-age=24h
type InstanceRules struct {
	path string // the file's, for Reload; "" for rules read from elsewhere
	// The rules in force, replaced whole by Reload, per instance.
	byInstance atomic.Pointer[instanceTable]
}

type instanceTable = map[string]*instanceLine

// instanceLine is one instance's line: a rule per operation, nil where
// the Policy's holds, and its action results' age limit, if it sets one.
type instanceLine struct {
	rules     [NumOperations]*Rule
	acMaxAge  time.Duration
	setMaxAge bool
}

// ReadInstanceRules parses an access file; an error names the line and
// what is wrong with it.
func ReadInstanceRules(r io.Reader) (*InstanceRules, error) {
	t, err := parseInstanceRules(r)
	if err != nil {
		return nil, err
	}
	ir := &InstanceRules{}
	ir.byInstance.Store(&t)
	return ir, nil
}

func parseInstanceRules(r io.Reader) (instanceTable, error) {
	t := instanceTable{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := parseInstanceLine(t, line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return t, nil
}

// LoadInstanceRules reads the access file at path.
func LoadInstanceRules(path string) (*InstanceRules, error) {
	t, err := loadInstanceTable(path)
	if err != nil {
		return nil, err
	}
	ir := &InstanceRules{path: path}
	ir.byInstance.Store(&t)
	return ir, nil
}

func loadInstanceTable(path string) (instanceTable, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := parseInstanceRules(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Reload reads the file LoadInstanceRules read again (on SIGHUP) and puts
// its rules in force, all at once; a file that does not load, or that
// names authenticated clients when canAuthenticate is false (no one
// could be one), leaves the rules in force and is the error.
func (ir *InstanceRules) Reload(canAuthenticate bool) error {
	if ir.path == "" {
		return fmt.Errorf("access file: these rules were not read from a file")
	}
	t, err := loadInstanceTable(ir.path)
	if err != nil {
		return err
	}
	if !canAuthenticate && tableNeedsIdentity(t) {
		return fmt.Errorf("%s names authenticated clients, and this server authenticates no one", ir.path)
	}
	ir.byInstance.Store(&t)
	return nil
}

func parseInstanceLine(byInstance instanceTable, line string) error {
	name, rest := line, ""
	if strings.HasPrefix(line, `"`) {
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			return fmt.Errorf("an instance name that starts with a quote must be a quoted string: %v", err)
		}
		name, _ = strconv.Unquote(q)
		rest = line[len(q):]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return fmt.Errorf("want a space after the quoted instance name")
		}
	} else if i := strings.IndexAny(line, " \t"); i >= 0 {
		name, rest = line[:i], line[i:]
	}
	if _, dup := byInstance[name]; dup {
		return fmt.Errorf("instance %q is named twice", name)
	}
	l := &instanceLine{}
	rules := &l.rules
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return fmt.Errorf("instance %q: no rules; want read-ac=WHO, write-ac=WHO, ac-max-age=DURATION or more", name)
	}
	for _, f := range fields {
		opName, who, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("instance %q: %q: want read-ac=WHO, write-ac=WHO or ac-max-age=DURATION", name, f)
		}
		if opName == acMaxAgeKey {
			if err := l.parseMaxAge(who); err != nil {
				return fmt.Errorf("instance %q: %v", name, err)
			}
			continue
		}
		var op Operation
		switch opName {
		case ReadAC.String():
			op = ReadAC
		case WriteAC.String():
			op = WriteAC
		case ReadCAS.String(), WriteCAS.String():
			return fmt.Errorf("instance %q: %s: the CAS is shared by every instance; its rules are --%s's", name, opName, opName)
		default:
			return fmt.Errorf("instance %q: unknown operation %q; want read-ac, write-ac or ac-max-age", name, opName)
		}
		if rules[op] != nil {
			return fmt.Errorf("instance %q: %s given twice", name, opName)
		}
		rule, err := ParseRule(who)
		if err != nil {
			return fmt.Errorf("instance %q: %s: %v", name, opName, err)
		}
		rules[op] = &rule
	}
	byInstance[name] = l
	return nil
}

// acMaxAgeKey sets an instance's action results' age limit.
const acMaxAgeKey = "ac-max-age"

func (l *instanceLine) parseMaxAge(value string) error {
	if l.setMaxAge {
		return fmt.Errorf("%s given twice", acMaxAgeKey)
	}
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return fmt.Errorf("%s=%q: want a duration of 0 or more (168h, 90m; 0: results never expire)", acMaxAgeKey, value)
	}
	l.acMaxAge, l.setMaxAge = d, true
	return nil
}

// rule returns the rule for op on instance, if the file sets one.
func (ir *InstanceRules) rule(instance string, op Operation) (Rule, bool) {
	if ir == nil || op >= NumOperations {
		return Rule{}, false
	}
	l, ok := (*ir.byInstance.Load())[instance]
	if !ok || l.rules[op] == nil {
		return Rule{}, false
	}
	return *l.rules[op], true
}

// ACMaxAge returns how old instance's action results (a /NAMESPACE's
// entries) may be before they are misses, if its line sets it (0: none
// expires); ok false: the server's --ac-max-age holds.
func (ir *InstanceRules) ACMaxAge(instance string) (maxAge time.Duration, ok bool) {
	if ir == nil {
		return 0, false
	}
	l, ok := (*ir.byInstance.Load())[instance]
	if !ok || !l.setMaxAge {
		return 0, false
	}
	return l.acMaxAge, true
}

// SetsACMaxAge reports whether any line sets ac-max-age.
func (ir *InstanceRules) SetsACMaxAge() bool {
	if ir != nil {
		for _, l := range *ir.byInstance.Load() {
			if l.setMaxAge {
				return true
			}
		}
	}
	return false
}

// Instances returns how many instances the file names, keyed namespaces
// (/NAMESPACE) left out: the rules that mean something only when action
// results are kept by instance.
func (ir *InstanceRules) Instances() int {
	n := 0
	if ir != nil {
		for name := range *ir.byInstance.Load() {
			if !strings.HasPrefix(name, "/") {
				n++
			}
		}
	}
	return n
}

// NeedsIdentity reports whether any of the file's rules admits only
// authenticated callers.
func (ir *InstanceRules) NeedsIdentity() bool {
	return ir != nil && tableNeedsIdentity(*ir.byInstance.Load())
}

func tableNeedsIdentity(t instanceTable) bool {
	for _, l := range t {
		for _, r := range l.rules {
			if r != nil && r.needsIdentity() {
				return true
			}
		}
	}
	return false
}

// Len returns how many instances and namespaces the file names.
func (ir *InstanceRules) Len() int {
	if ir == nil {
		return 0
	}
	return len(*ir.byInstance.Load())
}

// AuthorizeInstance is Authorize for op on instance's action cache: the
// rule the access file (Control.Instances) gives instance for op, or the
// Policy's. A refusal names the instance.
func (a *Control) AuthorizeInstance(c Credentials, instance string, op Operation) (Identity, *Denial) {
	if a == nil {
		return Identity{}, nil
	}
	rule, ok := a.Instances.rule(instance, op)
	if !ok {
		return a.Authorize(c, op)
	}
	id, err := a.identify(c)
	if err != nil {
		return Identity{}, &Denial{Reason: BadCredentials, What: op.String(), Err: err}
	}
	if rule.allows(id) {
		return id, nil
	}
	what := fmt.Sprintf("%s on instance %q", op, instance)
	if ns, ok := strings.CutPrefix(instance, "/"); ok {
		what = fmt.Sprintf("%s on namespace %q", op, ns)
	}
	return id, a.refuse(id, what)
}

// AuthorizeNamespace is Authorize for op (ReadAC or WriteAC) on a keyed
// namespace of the HTTP cache: the access file's rule for /namespace, or
// the Policy's.
func (a *Control) AuthorizeNamespace(c Credentials, namespace string, op Operation) (Identity, *Denial) {
	return a.AuthorizeInstance(c, "/"+namespace, op)
}

// AllowsInstance is Allows for op on instance's action cache: the access
// file's rule for it, or the Policy's.
func (a *Control) AllowsInstance(instance string, op Operation, id Identity) bool {
	if a == nil {
		return true
	}
	if rule, ok := a.Instances.rule(instance, op); ok {
		return rule.allows(id)
	}
	return a.Policy.Allows(op, id)
}

// NeedsTokens reports whether any of the file's rules admits bearer
// tokens by their claims.
func (ir *InstanceRules) NeedsTokens() bool {
	if ir == nil {
		return false
	}
	for _, l := range *ir.byInstance.Load() {
		for _, r := range l.rules {
			if r != nil && r.namesTokens() {
				return true
			}
		}
	}
	return false
}
