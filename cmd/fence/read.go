package main

import "io"

// readCmd prints a fenced resource: value, last accepted token, version.
func readCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("read", "RESOURCE", g, stderr)
	pos, err := parseExact(fs, args, "RESOURCE")
	if err != nil {
		return usageExit(err)
	}
	c, ctx, done, err := g.call(0)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	r, err := c.Read(ctx, pos[0])
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout, resourceLine("", r), toResourceJSON(r, false))
	return exitOK
}
