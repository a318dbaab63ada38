package main

import (
	"context"
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// writeCmd sets a fenced resource if --token is not older than the last
// token it accepted.
func writeCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	f := newFencedCmd("write", "RESOURCE --token N --value V [--op-id S]", "wrote ", g, stderr)
	value := f.fs.String("value", "", "value to write (required; --value '' writes an empty value)")
	return f.run(g, args, stdout, stderr, func() error {
		if !wasSet(f.fs, "value") { // a forgotten --value must not overwrite the resource with nothing
			return &usageError{"write: --value is required"}
		}
		return nil
	}, func(ctx context.Context, c *client.Client, res string, tok fence.Token, opts []client.OpOption) (client.Resource, error) {
		return c.Write(ctx, res, tok, []byte(*value), opts...)
	})
}
