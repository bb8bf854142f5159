package main

import (
	"context"
	"flag"

	"github.com/membuf/membuf/bench"
)

// `membuf bench` is the package tree bench/, a module of its own: the
// command that measures apart from the one that serves.
func init() {
	register(&command{
		name:        "bench",
		subcommands: true,
		summary:     bench.Summary(),
		flags: func(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
			return bench.Command(std.out, std.err)
		},
	})
}
