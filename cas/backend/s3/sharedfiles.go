package s3

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// profile is what the shared AWS files (~/.aws/config and
// ~/.aws/credentials) say of one profile, the credentials file's keys
// over the config file's.
type profile map[string]string

// loadProfile reads profile name from the shared files, at
// AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE or their default
// places; a file that does not exist is empty. found says whether either
// file has the profile.
func loadProfile(name string) (p profile, found bool, err error) {
	home, _ := os.UserHomeDir()
	configFile := os.Getenv("AWS_CONFIG_FILE")
	if configFile == "" {
		configFile = filepath.Join(home, ".aws", "config")
	}
	credsFile := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if credsFile == "" {
		credsFile = filepath.Join(home, ".aws", "credentials")
	}
	p = profile{}
	// In the config file a profile's section is [profile NAME], but for
	// [default]; in the credentials file it is [NAME].
	section := "profile " + name
	if name == "default" {
		section = "default"
	}
	for _, f := range []struct{ path, section string }{{configFile, section}, {credsFile, name}} {
		data, err := os.ReadFile(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		keys, ok := parseINISection(string(data), f.section)
		found = found || ok
		for k, v := range keys {
			p[k] = v
		}
	}
	return p, found, nil
}

// parseINISection returns the keys of section in an AWS shared file: a
// "[section]" line starts one; "key = value" lines are its keys, their
// names lowercased; "#" and ";" start comments; an indented line belongs
// to a nested block (s3 = ...) and is ignored. ok says whether the
// section is there.
func parseINISection(data, section string) (keys map[string]string, ok bool) {
	keys = map[string]string{}
	in := false
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			name, _, _ := strings.Cut(line[1:], "]")
			in = strings.Join(strings.Fields(name), " ") == section
			ok = ok || in
			continue
		}
		if !in || raw[0] == ' ' || raw[0] == '\t' {
			continue
		}
		k, v, found := strings.Cut(line, "=")
		if !found {
			continue
		}
		if i := strings.Index(v, " #"); i >= 0 {
			v = v[:i]
		}
		keys[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	return keys, ok
}
