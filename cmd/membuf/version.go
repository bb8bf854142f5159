package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{
		name:    "version",
		summary: "print membuf's module version, VCS revision and Go version",
		flags: func(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
			fs := newFlagSet("version", "", "Print the version of the membuf module this binary was built from, the VCS\n"+
				"revision it was built at (when the build recorded one), and the Go toolchain and platform.")
			return fs, func(_ context.Context, args []string) error {
				if len(args) > 0 {
					return usageError("unexpected arguments %q: version takes none", args)
				}
				bi, ok := debug.ReadBuildInfo()
				if !ok {
					bi = nil
				}
				fmt.Fprint(std.out, versionText(bi))
				return nil
			}
		},
	})
}

// versionText describes the build bi (nil: the binary has no build
// information), as `membuf version` prints it:
//
//	membuf v0.0.0-20261123091705-6bd1dec0a1b2 (module github.com/membuf/membuf/cmd/membuf)
//	revision 6bd1dec0a1b2... from 2026-11-23T09:17:05Z, with uncommitted changes
//	go1.26.8 linux/amd64
func versionText(bi *debug.BuildInfo) string {
	var b strings.Builder
	if bi == nil {
		fmt.Fprintf(&b, "membuf (unknown version: the binary carries no build information)\n")
		fmt.Fprintf(&b, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return b.String()
	}
	fmt.Fprintf(&b, "membuf %s (module %s)\n", bi.Main.Version, bi.Main.Path)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "revision %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " from %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteString("\n")
	} else {
		b.WriteString("revision unknown (built without VCS stamping: -buildvcs=false, or outside a checkout)\n")
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if goos == "" {
		goos, goarch = runtime.GOOS, runtime.GOARCH
	}
	fmt.Fprintf(&b, "%s %s/%s\n", bi.GoVersion, goos, goarch)
	return b.String()
}
