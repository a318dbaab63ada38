package main

import (
	"fmt"
	"io"

	"github.com/fenceworks/fence"
)

// releaseCmd frees a lock held by --token.
func releaseCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("release", "NAME --token N", g, stderr)
	token := fs.Uint64("token", 0, "the lease's token (required)")
	pos, err := parseExact(fs, args, "NAME")
	if err != nil {
		return usageExit(err)
	}
	if err := requireToken(fs, "release"); err != nil {
		return fail(g, stdout, stderr, err)
	}
	c, ctx, done, err := g.call(0)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	if err := c.Release(ctx, pos[0], fence.Token(*token)); err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout, fmt.Sprintf("released %s token=%d", pos[0], *token),
		map[string]any{"name": pos[0], "token": *token, "released": true})
	return exitOK
}
