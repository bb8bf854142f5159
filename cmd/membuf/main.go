// Command membuf runs the membuf blob cache and its tools.
//
//	membuf serve [flags]             run the content-addressed blob cache
//	membuf bench <workload> [flags]  measure membuf beside grpc-go's defaults or other servers: blobs, grpc, build
//	membuf ceiling [flags]           serve ByteStream at the least cost a checking server can: bench blobs' ceiling
//	membuf version                   print the module version and VCS revision
//	membuf help [command [workload]] print usage (on stdout, as -h does)
//
// Each subcommand lives in its own file and adds itself to the table with
// register, so adding one touches nothing else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A command is one subcommand of membuf.
type command struct {
	name    string
	summary string // one line for `membuf help`
	// subcommands: the command's first argument names a subcommand with
	// flags of its own (bench's workloads), so that `membuf help bench
	// blobs` can show them.
	subcommands bool
	// flags returns a fresh flag set for the command and the function that
	// runs it once the flags are parsed. A fresh set per call keeps runs
	// independent, which the tests rely on.
	flags func(stdio *stdio) (*flag.FlagSet, func(ctx context.Context, args []string) error)
}

// stdio is where a command prints: its result on out, usage and logs on err.
type stdio struct {
	out, err io.Writer
}

var commands []*command

func register(c *command) {
	commands = append(commands, c)
	slices.SortFunc(commands, func(a, b *command) int { return strings.Compare(a.name, b.name) })
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// errUsage marks an error caused by how membuf was invoked; it exits 2, like
// the flag package's own errors.
var errUsage = errors.New("usage error")

// usageError wraps a message so that run reports it as a usage error.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &stdio{out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}

// run runs membuf with args (without the program name) and returns the exit
// code: 0 on success, 1 when the command failed, 2 on a usage error. The
// command stops when ctx is cancelled.
func run(ctx context.Context, args []string, std *stdio) int {
	if len(args) == 0 {
		printUsage(std.err)
		return 2
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(args, std)
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(std.err, "membuf: unknown command %q\n\n", name)
		printUsage(std.err)
		return 2
	}
	fs, runCmd := c.flags(std)
	if help, err := parseFlags(fs, args, std); help {
		return 0
	} else if err != nil {
		return 2
	}
	if err := runCmd(ctx, fs.Args()); err != nil {
		if errors.Is(err, errUsageReported) {
			return 2
		}
		fmt.Fprintf(std.err, "membuf %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(std.err, "Run 'membuf %s -h' for usage.\n", c.name)
			return 2
		}
		return 1
	}
	return 0
}

// errUsageReported is a usage error whose message has been printed
// already (by parseFlags).
var errUsageReported = fmt.Errorf("%w (reported)", errUsage)

// parseFlags parses args into fs. Asked for usage (-h, -help, --help), it
// prints it on stdout, like every other form of help, and reports help; a
// bad flag prints one line naming the flag and what is wrong with it, and
// where the usage is, on stderr (not the whole usage: serve's is over a
// hundred lines, and the mistake scrolls away above it), and returns
// errUsageReported. Afterwards fs writes to stderr.
func parseFlags(fs *flag.FlagSet, args []string, std *stdio) (help bool, err error) {
	fs.SetOutput(io.Discard) // the flag package's message and usage: replaced below
	err = fs.Parse(args)
	fs.SetOutput(std.err)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(std.out)
		fs.Usage()
		fs.SetOutput(std.err)
		return true, nil
	case err != nil:
		fmt.Fprintf(std.err, "%s: %s\nRun '%s -h' for usage.\n", fs.Name(), explainFlagError(fs, err), fs.Name())
		return false, errUsageReported
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
		if n, ok := nearest(strings.TrimLeft(name, "-"), names); ok {
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

// valueError is err, the error of f's Set, saying what f wants where the
// flag package says only "parse error".
func valueError(f *flag.Flag, err error) error {
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

func help(args []string, std *stdio) int {
	if len(args) == 0 {
		printUsage(std.out)
		return 0
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(std.err, "membuf help: unknown command %q\n\n", args[0])
		printUsage(std.err)
		return 2
	}
	fs, runCmd := c.flags(std)
	if len(args) > 1 {
		if !c.subcommands {
			fmt.Fprintf(std.err, "membuf help: %s has no subcommands\n", c.name)
			return 2
		}
		// `membuf help bench blobs` is `membuf bench blobs -h`.
		if err := runCmd(context.Background(), append(args[1:len(args):len(args)], "-h")); err != nil {
			fmt.Fprintf(std.err, "membuf help %s: %v\n", strings.Join(args, " "), err)
			return 2
		}
		return 0
	}
	fs.SetOutput(std.out)
	fs.Usage()
	return 0
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "membuf: pooled byte buffers and a content-addressed blob cache built on them.\n\nUsage:\n\n\tmembuf <command> [flags]\n\nCommands:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'membuf help <command>' or 'membuf <command> -h' for a command's flags.\n")
}

// newFlagSet returns a flag set whose usage names the command, says what it
// does and lists its flags.
func newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet("membuf "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: membuf %s %s\n\n%s\n\nFlags:\n", name, synopsis, description)
		fs.PrintDefaults()
	}
	return fs
}
