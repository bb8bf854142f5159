package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/membuf/membuf"
)

// Settings of `membuf serve` come from three places, and the first that
// sets a flag wins: the command line, then the environment (MEMBUF_ and
// the flag's name in capitals, dashes as underscores: MEMBUF_MAX_SIZE for
// --max-size), then the file --config names (or MEMBUF_CONFIG), in TOML:
// one key per flag, with the flag's name, at the top level.
//
//	max-size = "200GiB"
//	s3 = "s3://cache/ci?region=eu-west-1"
//	s3-write-through = true
//	scrub-rate = "16MiB"
//
// TOML rather than YAML: a flag is a name and a value, and TOML writes
// exactly that, with no indentation to get wrong and no implicit typing
// (YAML 1.1 reads `no` as false and `010` as 8). A value may be a string,
// an integer, a boolean, or an array (a comma-separated list flag); it is
// parsed as the flag would parse it on the command line. An unknown key, a
// table, or a value the flag refuses is a usage error (exit status 2)
// naming it, before anything starts; so is a bad value in a MEMBUF_
// variable, and a MEMBUF_ variable that names no flag (a misspelling would
// otherwise leave the setting at its default, unseen), except those that
// membuf or its tests read for themselves (otherMembufVars).

// configFlag is the flag that names the file; it cannot be set in it.
const configFlag = "config"

// otherMembufVars are the MEMBUF_ variables that are not settings of
// serve: membuf's debug mode, and those of the scripts in .ci and of the
// tests (which may start serve with their own environment).
var otherMembufVars = []string{membuf.DebugEnv, "MEMBUF_MINIO", "MEMBUF_FAKEGCS", "MEMBUF_AZURITE", "MEMBUF_TOOLS", "MEMBUF_BENCH_SERVE"}

// otherMembufPrefixes begin the names of the tests' own MEMBUF_ variables.
var otherMembufPrefixes = []string{"MEMBUF_TEST_", "MEMBUF_CAS_CRASH_"}

// checkMembufEnv returns a usage error naming each variable in environ
// (os.Environ's form) that begins MEMBUF_, names no flag of fs and is not
// one of otherMembufVars, with the name probably meant.
func checkMembufEnv(fs *flag.FlagSet, environ []string) error {
	known := slices.Clone(otherMembufVars)
	fs.VisitAll(func(f *flag.Flag) { known = append(known, envName(f.Name)) })
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MEMBUF_") || slices.Contains(known, name) ||
			slices.ContainsFunc(otherMembufPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		hint := "; every flag of membuf serve can be set as MEMBUF_<FLAG> (MEMBUF_MAX_SIZE for --max-size)"
		// Compared without the prefix they all share, which would make
		// any two names look alike.
		var flagParts []string
		for _, k := range known {
			flagParts = append(flagParts, strings.TrimPrefix(k, "MEMBUF_"))
		}
		if n, ok := nearest(strings.TrimPrefix(name, "MEMBUF_"), flagParts); ok {
			hint = " (did you mean MEMBUF_" + n + "?)"
		}
		errs = append(errs, fmt.Errorf("environment variable %s is not a setting of membuf serve%s", name, hint))
	}
	if err := errors.Join(errs...); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return "MEMBUF_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// applySettingSources sets, in fs (already parsed from the command line),
// every flag the command line left alone from the environment (lookup)
// and then from the config file, and returns where each flag that was set
// got its value: "flag", "env MEMBUF_…" or "file PATH".
func applySettingSources(fs *flag.FlagSet, lookup func(string) (string, bool)) (map[string]string, error) {
	from := map[string]string{}
	fs.Visit(func(f *flag.Flag) { from[f.Name] = "flag" })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if from[f.Name] != "" {
			return
		}
		v, ok := lookup(envName(f.Name))
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v", envName(f.Name), v, valueError(f, err)))
			return
		}
		from[f.Name] = "env " + envName(f.Name)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, usageError("%v", err)
	}
	path := fs.Lookup(configFlag).Value.String()
	if path == "" {
		return from, nil
	}
	values, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case k == configFlag:
			errs = append(errs, fmt.Errorf("key %q: a config file cannot name another", k))
		case fs.Lookup(k) == nil:
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			hint := ""
			if n, ok := nearest(k, names); ok {
				hint = fmt.Sprintf(" (did you mean %q?)", n)
			}
			errs = append(errs, fmt.Errorf("unknown key %q: not a flag of membuf serve%s", k, hint))
		case from[k] != "":
			// The command line or the environment set it: they win.
		default:
			if err := fs.Set(k, values[k]); err != nil {
				errs = append(errs, fmt.Errorf("key %q = %q: %v", k, values[k], valueError(fs.Lookup(k), err)))
				continue
			}
			from[k] = "file " + path
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError("--config %s: %v", path, err)
	}
	return from, nil
}

// readConfigFile reads a TOML file of flag settings and returns each
// key's value as the command line would give it.
func readConfigFile(path string) (map[string]string, error) {
	var raw map[string]any
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageError("--config %s: %v", path, err)
		}
		return nil, usageError("--config %s: not TOML: %v", path, err)
	}
	values := make(map[string]string, len(raw))
	var errs []error
	for k, v := range raw {
		s, err := configValue(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("key %q: %v", k, err))
			continue
		}
		values[k] = s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError("--config %s: %v", path, err)
	}
	return values, nil
}

// configValue returns a TOML value as a flag's text.
func configValue(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, err := configValue(e)
			if err != nil {
				return "", err
			}
			if _, nested := e.([]any); nested {
				return "", errors.New("an array of arrays; a flag takes one list")
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("a table; the file holds flags, name = value, at the top level")
	}
	return "", fmt.Errorf("a %T; want a string, number, boolean or array", v)
}

// settingSourcesLog says, for the start-up line, which flags were set and
// where: flag="dir listen", env="MEMBUF_S3", file="/etc/membuf.toml: max-size s3-write-through".
func settingSourcesLog(from map[string]string) []any {
	var flags, env, file []string
	var path string
	for name, src := range from {
		switch kind, where, _ := strings.Cut(src, " "); kind {
		case "env":
			env = append(env, where)
		case "file":
			file, path = append(file, name), where
		default:
			flags = append(flags, name)
		}
	}
	var attrs []any
	for _, g := range []struct {
		key   string
		names []string
	}{{"flag", flags}, {"env", env}, {"file", file}} {
		if len(g.names) == 0 {
			continue
		}
		slices.Sort(g.names)
		v := strings.Join(g.names, " ")
		if g.key == "file" {
			v = path + ": " + v
		}
		attrs = append(attrs, g.key, v)
	}
	return attrs
}
