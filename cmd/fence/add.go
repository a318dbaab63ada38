package main

import (
	"context"
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// addCmd adds --delta to the integer value of a fenced resource, under the
// same token rule as write.
func addCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	f := newFencedCmd("add", "RESOURCE --token N --delta N [--op-id S]", "added to ", g, stderr)
	delta := f.fs.Int64("delta", 0, "amount to add (may be negative)")
	return f.run(g, args, stdout, stderr, nil,
		func(ctx context.Context, c *client.Client, res string, tok fence.Token, opts []client.OpOption) (client.Resource, error) {
			return c.Add(ctx, res, tok, *delta, opts...)
		})
}
