// Package cli holds the conventions every membuf command shares: how a
// flag set prints its usage, how a bad flag or value is reported (one line
// naming it, the flag probably meant, exit status 2), sizes written as
// 64KiB or 10G, and a file written whole. cmd/membuf and `membuf bench`
// (bench/) both use it, so that every command reads alike.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrUsage marks an error caused by how membuf was invoked; it exits 2, like
// the flag package's own errors.
var ErrUsage = errors.New("usage error")

// UsageError wraps a message so that run reports it as a usage error.
func UsageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}

// ErrUsageReported is a usage error whose message has been printed
// already (by Parse).
var ErrUsageReported = fmt.Errorf("%w (reported)", ErrUsage)

// Parse parses args into fs. Asked for usage (-h, -help, --help), it
// prints it on stdout, like every other form of help, and reports help; a
// bad flag prints one line naming the flag and what is wrong with it, and
// where the usage is, on stderr (not the whole usage: serve's is over a
// hundred lines, and the mistake scrolls away above it), and returns
// ErrUsageReported. Afterwards fs writes to stderr.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (help bool, err error) {
	fs.SetOutput(io.Discard) // the flag package's message and usage: replaced below
	err = fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return true, nil
	case err != nil:
		fmt.Fprintf(stderr, "%s: %s\nRun '%s -h' for usage.\n", fs.Name(), explainFlagError(fs, err), fs.Name())
		return false, ErrUsageReported
	}
	return false, nil
}

// explainFlagError returns the flag package's message for err, with what
// it leaves out: the flag probably meant, for one that does not exist, and
// what a value should look like, for one it calls a "parse error".
func explainFlagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if n, ok := Nearest(strings.TrimLeft(name, "-"), names); ok {
			msg += " (did you mean -" + n + "?)"
		}
		return msg
	}
	if head, ok := strings.CutSuffix(msg, ": parse error"); ok {
		// "invalid boolean value "x" for -name" or "invalid value "x" for flag -name"
		if i := strings.LastIndex(head, " -"); i >= 0 {
			if f := fs.Lookup(head[i+2:]); f != nil {
				return head + ": " + wantOf(f)
			}
		}
	}
	return msg
}

// ValueError is err, the error of f's Set, saying what f wants where the
// flag package says only "parse error".
func ValueError(f *flag.Flag, err error) error {
	if err.Error() == "parse error" {
		return errors.New(wantOf(f))
	}
	return err
}

// wantOf says what a value of f looks like, for a flag of the standard
// library's kinds.
func wantOf(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case bool:
			return "want true or false"
		case time.Duration:
			return "want a duration such as 300ms, 30s or 5m"
		case int, int64, uint, uint64:
			return "want a whole number"
		case float64:
			return "want a number"
		}
	}
	return "parse error"
}

// NewFlagSet returns a flag set whose usage names the command, says what it
// does and lists its flags.
func NewFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("membuf "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: membuf %s %s\n\n%s\n\nFlags:\n", name, synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}

// WriteFileAtomic writes data to a temporary file beside name and renames it
// into place, so that a reader polling for name never sees it half written.
func WriteFileAtomic(name string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), name); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// IsLoopback reports whether host names this machine: localhost or a
// loopback IP address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
