package main

import (
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// addCmd adds --delta to the integer value of a fenced resource, under the
// same token rule as write.
func addCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("add", "RESOURCE --token N --delta N [--op-id S]", g, stderr)
	token := fs.Uint64("token", 0, "fencing token (required)")
	delta := fs.Int64("delta", 0, "amount to add (may be negative)")
	opID := fs.String("op-id", "", "idempotency key: a repeated op-id is not applied twice (default: random)")
	pos, err := parseExact(fs, args, "RESOURCE")
	if err != nil {
		return usageExit(err)
	}
	if err := requireToken(fs, "add"); err != nil {
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
	r, err := c.Add(ctx, pos[0], fence.Token(*token), *delta, opts...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout, resourceLine("added to ", r), toResourceJSON(r, true))
	return exitOK
}
