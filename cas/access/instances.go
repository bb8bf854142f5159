package access

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
//	# instance   rules
//	team-a       read-ac=anyone write-ac=alice,bob
//	ci/release   write-ac=release-bot
//	""           write-ac=nobody
type InstanceRules struct {
	byInstance map[string]*[NumOperations]*Rule // nil entry: the Policy's
}

// ReadInstanceRules parses an access file; an error names the line and
// what is wrong with it.
func ReadInstanceRules(r io.Reader) (*InstanceRules, error) {
	ir := &InstanceRules{byInstance: map[string]*[NumOperations]*Rule{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := ir.parseLine(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return ir, nil
}

// LoadInstanceRules reads the access file at path.
func LoadInstanceRules(path string) (*InstanceRules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ir, err := ReadInstanceRules(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ir, nil
}

func (ir *InstanceRules) parseLine(line string) error {
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
	if _, dup := ir.byInstance[name]; dup {
		return fmt.Errorf("instance %q is named twice", name)
	}
	var rules [NumOperations]*Rule
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return fmt.Errorf("instance %q: no rules; want read-ac=WHO, write-ac=WHO or both", name)
	}
	for _, f := range fields {
		opName, who, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("instance %q: %q: want read-ac=WHO or write-ac=WHO", name, f)
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
			return fmt.Errorf("instance %q: unknown operation %q; want read-ac or write-ac", name, opName)
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
	ir.byInstance[name] = &rules
	return nil
}

// rule returns the rule for op on instance, if the file sets one.
func (ir *InstanceRules) rule(instance string, op Operation) (Rule, bool) {
	if ir == nil || op >= NumOperations {
		return Rule{}, false
	}
	rules, ok := ir.byInstance[instance]
	if !ok || rules[op] == nil {
		return Rule{}, false
	}
	return *rules[op], true
}

// NeedsIdentity reports whether any of the file's rules admits only
// authenticated callers.
func (ir *InstanceRules) NeedsIdentity() bool {
	if ir == nil {
		return false
	}
	for _, rules := range ir.byInstance {
		for _, r := range rules {
			if r != nil && r.needsIdentity() {
				return true
			}
		}
	}
	return false
}

// Len returns how many instances the file names.
func (ir *InstanceRules) Len() int {
	if ir == nil {
		return 0
	}
	return len(ir.byInstance)
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
	return id, a.refuse(id, fmt.Sprintf("%s on instance %q", op, instance))
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
