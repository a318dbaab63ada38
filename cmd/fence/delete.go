package main

import (
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// deleteCmd removes a fenced resource's value if --token is not older than
// the last token it accepted (fenced like write).
func deleteCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("delete", "RESOURCE --token N [--op-id S]", g, stderr)
	token := fs.Uint64("token", 0, "fencing token (required)")
	opID := fs.String("op-id", "", "idempotency key: a repeated op-id is not applied twice (default: random)")
	pos, err := parseExact(fs, args, "RESOURCE")
	if err != nil {
		return usageExit(err)
	}
	if err := requireToken(fs, "delete"); err != nil {
		return fail(g, stdout, stderr, err)
	}
	c, ctx, done, err := g.call(0)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	var opts []client.OpOption
	if *opID != "" {
		opts = append(opts, client.OpID(*opID))
	}
	r, err := c.Delete(ctx, pos[0], fence.Token(*token), opts...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout, resourceLine("deleted ", r), toResourceJSON(r, true))
	return exitOK
}
