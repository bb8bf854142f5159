package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

func init() {
	register(&command{
		name:    "bucket",
		summary: "print an object store bucket's layout (packs or one object per entry), or convert it to packs",
		flags:   bucketFlags,
	})
}

func bucketFlags(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
	fs := newFlagSet("bucket", "[flags] URL",
		"Print the layout of the bucket URL names (an --upstream URL of s3://, gs:// or azblob://,\n"+
			"with its endpoint= and the same credentials): packs, or one object per entry, as the\n"+
			"bucket's membuf-layout.json records it or, without one, as what it holds says.\n"+
			"With --convert-to packs, record packs as its layout: entries written since go to packs,\n"+
			"those written before stay where they are and are still read. Nodes running over the\n"+
			"bucket keep their layout until they restart (docs/packs.md).")
	to := fs.String("convert-to", "", "`layout` to record: packs (the only one a bucket is converted to)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for the bucket")
	return fs, func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return usageError("want one bucket URL, got %q", args)
		}
		switch *to {
		case "":
			found, err := server.BucketLayout(ctx, args[0], *timeout)
			if err != nil {
				return err
			}
			fmt.Fprintf(std.out, "%s\n", found)
			return nil
		case "packs":
			was, err := server.ConvertBucket(ctx, args[0], *timeout)
			if err != nil {
				return err
			}
			fmt.Fprintf(std.out, "was %s; now packs, recorded\n", was)
			return nil
		}
		return usageError("--convert-to %q: want packs", *to)
	}
}
