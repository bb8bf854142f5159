// Command membuf-gocache is a GOCACHEPROG program: the go command keeps
// its build cache through it, in a local directory shared through a remote
// cache (REAPI over gRPC, or gocached's HTTP protocol). See
// docs/gocache.md.
//
//	GOCACHEPROG="membuf-gocache -remote grpc://cache.example:8980" go build ./...
//
// Every flag has an environment variable (MEMBUF_GOCACHE_REMOTE for
// -remote, and so on), so that GOCACHEPROG can stay the program's name;
// a flag wins over its variable. The token and the password come from the
// environment only (MEMBUF_GOCACHE_TOKEN; the URL's userinfo, or
// MEMBUF_GOCACHE_PASSWORD with a user in the URL), never from the command
// line, which other users can read.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/membuf/membuf/gocacheprog"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "membuf-gocache:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("membuf-gocache", flag.ContinueOnError)
	var (
		dir      = fs.String("dir", "", "local `directory` of the files go is handed (default: membuf-gocache under the user's cache directory)")
		maxSize  = fs.String("max-size", "10GiB", "bound of -dir, trimmed least recently used first when a go command ends (0: none)")
		remote   = fs.String("remote", "", "remote cache `URL`: grpc://host:port or grpcs://host:port (REAPI), http:// or https:// (gocached's protocol); none: the local directory alone")
		instance = fs.String("instance", "", "REAPI instance `name` the entries are kept under")
		readOnly = fs.Bool("read-only", false, "ask the remote, never write to it (machines whose results are not trusted)")
		caFile   = fs.String("tls-ca", "", "PEM `file` of the CAs that verify the remote's certificate (default: the system's)")
		certFile = fs.String("tls-cert", "", "PEM client certificate `file`, for mutual TLS; needs -tls-key")
		keyFile  = fs.String("tls-key", "", "PEM private key `file` of -tls-cert")
		getWait  = fs.Duration("get-timeout", gocacheprog.DefaultGetTimeout, "how long a remote get may wait for an answer or its next bytes before the remote is left alone for this go command")
		upWait   = fs.Duration("upload-wait", gocacheprog.DefaultUploadWait, "how long a go command's end waits for its outputs' uploads")
		queue    = fs.Int("upload-queue", gocacheprog.DefaultUploadQueue, "outputs waiting for upload at most; more are not uploaded")
		verbose  = fs.Bool("v", false, "log each go command's counts at its end")
	)
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	max, err := parseSize(*maxSize)
	if err != nil {
		return fmt.Errorf("-max-size: %w", err)
	}
	if *dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no -dir, and %w", err)
		}
		*dir = filepath.Join(base, "membuf-gocache")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := gocacheprog.Options{Dir: *dir, MaxSize: max, ReadOnly: *readOnly, GetTimeout: *getWait, UploadWait: *upWait, UploadQueue: *queue, Logger: log}
	if *remote != "" {
		u := *remote
		if pw, ok := os.LookupEnv("MEMBUF_GOCACHE_PASSWORD"); ok {
			if u, err = withPassword(u, pw); err != nil {
				return err
			}
		}
		cfg := gocacheprog.RemoteConfig{Instance: *instance, CAFile: *caFile, CertFile: *certFile, KeyFile: *keyFile, Token: os.Getenv("MEMBUF_GOCACHE_TOKEN")}
		if opts.Remote, err = gocacheprog.OpenRemote(u, cfg); err != nil {
			return err
		}
	}
	c, err := gocacheprog.Open(opts)
	if err != nil {
		return err
	}
	// go ends the program by closing its stdin or sending close; a signal
	// (go interrupted) ends it as the end of the input does.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err = gocacheprog.Serve(ctx, os.Stdin, os.Stdout, c)
	if *verbose {
		st := c.Stats()
		fmt.Fprintf(os.Stderr, "membuf-gocache: %v: %d gets (%d local, %d remote, %d misses), %d puts (%d uploaded, %d not), %d remote errors, %d mismatches, %d of %d fetches ahead hit\n",
			time.Since(start).Round(time.Millisecond), st.Gets.Load(), st.LocalHits.Load(), st.RemoteHits.Load(), st.Misses.Load(),
			st.Puts.Load(), st.Uploaded.Load(), st.UploadsDropped.Load()+st.UploadFails.Load(), st.RemoteErrors.Load(), st.Mismatches.Load(), st.FetchedAhead.Load(), st.AheadTries.Load())
	}
	return err
}

// envName is a flag's environment variable: -get-timeout's is
// MEMBUF_GOCACHE_GET_TIMEOUT.
func envName(flag string) string {
	return "MEMBUF_GOCACHE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// withPassword sets the password of u's user.
func withPassword(raw, pw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.User == nil {
		return "", fmt.Errorf("MEMBUF_GOCACHE_PASSWORD is set, but -remote names no user (https://user@host)")
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String(), nil
}

// parseSize reads a size in bytes, with an optional KiB, MiB, GiB or TiB
// (or K, M, G, T) suffix.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for i, suf := range []string{"K", "M", "G", "T"} {
		if t, ok := strings.CutSuffix(s, suf+"iB"); ok {
			s, mult = t, 1<<(10*(i+1))
			break
		}
		if t, ok := strings.CutSuffix(s, suf); ok {
			s, mult = t, 1<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (10GiB, 500MiB, 0)", s)
	}
	return n * mult, nil
}
