package main

import (
	"context"
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// deleteCmd removes a fenced resource's value if --token is not older than
// the last token it accepted (fenced like write).
func deleteCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	f := newFencedCmd("delete", "RESOURCE --token N [--op-id S]", "deleted ", g, stderr)
	return f.run(g, args, stdout, stderr, nil,
		func(ctx context.Context, c *client.Client, res string, tok fence.Token, opts []client.OpOption) (client.Resource, error) {
			return c.Delete(ctx, res, tok, opts...)
		})
}
