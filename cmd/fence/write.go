package main

import (
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// writeCmd sets a fenced resource if --token is not older than the last
// token it accepted.
func writeCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("write", "RESOURCE --token N --value V [--op-id S]", g, stderr)
	token := fs.Uint64("token", 0, "fencing token (required)")
	value := fs.String("value", "", "value to write (required; --value '' writes an empty value)")
	opID := fs.String("op-id", "", "idempotency key: a repeated op-id is not applied twice (default: random)")
	pos, err := parseExact(fs, args, "RESOURCE")
	if err != nil {
		return usageExit(err)
	}
	if err := requireToken(fs, "write"); err != nil {
		return fail(g, stdout, stderr, err)
	}
	if !wasSet(fs, "value") { // a forgotten --value must not overwrite the resource with nothing
		return fail(g, stdout, stderr, &usageError{"write: --value is required"})
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
	r, err := c.Write(ctx, pos[0], fence.Token(*token), []byte(*value), opts...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout, resourceLine("wrote ", r), toResourceJSON(r, true))
	return exitOK
}
