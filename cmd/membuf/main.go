// Command membuf runs the membuf blob cache and its tools.
//
//	membuf serve [flags]   run the content-addressed blob cache
//	membuf bench <workload> [flags]  compare membuf with grpc-go's defaults: blobs, grpc
//	membuf help [command]  print usage
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
)

// A command is one subcommand of membuf.
type command struct {
	name    string
	summary string // one line for `membuf help`
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
	fs.SetOutput(std.err)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// The flag package has already printed the error and the usage.
		return 2
	}
	if err := runCmd(ctx, fs.Args()); err != nil {
		fmt.Fprintf(std.err, "membuf %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(std.err, "Run 'membuf %s -h' for usage.\n", c.name)
			return 2
		}
		return 1
	}
	return 0
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
	fs, _ := c.flags(std)
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
