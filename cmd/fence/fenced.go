package main

import (
	"context"
	"flag"
	"io"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// fencedCmd is what write, add and delete share: RESOURCE, a required
// --token, an optional --op-id, one fenced call, and the resource printed
// after it.
type fencedCmd struct {
	name  string // the subcommand, for its messages
	verb  string // printed before the resource: "wrote ", "added to ", ...
	fs    *flag.FlagSet
	token *uint64
	opID  *string
}

// newFencedCmd makes the flag set of a fenced change with --token and
// --op-id; the caller adds its own flags before run.
func newFencedCmd(name, usage, verb string, g *globals, stderr io.Writer) *fencedCmd {
	fs := newFlagSet(name, usage, g, stderr)
	return &fencedCmd{
		name: name, verb: verb, fs: fs,
		token: fs.Uint64("token", 0, "fencing token (required)"),
		opID:  fs.String("op-id", "", "idempotency key: a repeated op-id is not applied twice (default: random)"),
	}
}

// run parses args, checks --token and then check (nil: nothing more), and
// calls op with the resource, token and op options.
func (f *fencedCmd) run(g *globals, args []string, stdout, stderr io.Writer, check func() error,
	op func(ctx context.Context, c *client.Client, resource string, token fence.Token, opts []client.OpOption) (client.Resource, error)) int {
	pos, err := parseExact(f.fs, args, "RESOURCE")
	if err != nil {
		return usageExit(err)
	}
	if err := requireToken(f.fs, f.name); err != nil {
		return fail(g, stdout, stderr, err)
	}
	if check != nil {
		if err := check(); err != nil {
			return fail(g, stdout, stderr, err)
		}
	}
	c, ctx, done, err := g.call(0)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	var opts []client.OpOption
	if *f.opID != "" {
		opts = append(opts, client.OpID(*f.opID))
	}
	r, err := op(ctx, c, pos[0], fence.Token(*f.token), opts)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout, resourceLine(f.verb, r), toResourceJSON(r, true))
	return exitOK
}
