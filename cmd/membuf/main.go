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

	"github.com/membuf/membuf/internal/cli"
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

// The CLI's conventions, shared with `membuf bench` (internal/cli).
var (
	errUsage         = cli.ErrUsage
	errUsageReported = cli.ErrUsageReported
	usageError       = cli.UsageError
	newFlagSet       = cli.NewFlagSet
	formatSize       = cli.FormatSize
	nearest          = cli.Nearest
	valueError       = cli.ValueError
	writeFileAtomic  = cli.WriteFileAtomic
)

// sizeFlag is a flag.Value holding a byte count (cli.ParseSize's syntax).
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string     { return cli.Size{P: f.n}.String() }
func (f sizeFlag) Set(s string) error { return cli.Size{P: f.n}.Set(s) }

// parseFlags parses args into fs: cli.Parse, on std.
func parseFlags(fs *flag.FlagSet, args []string, std *stdio) (help bool, err error) {
	return cli.Parse(fs, args, std.out, std.err)
}
