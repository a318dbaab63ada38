package main

import (
	"fmt"
	"io"

	"github.com/fenceworks/fence"
)

// renewCmd extends a lease held by --token.
func renewCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("renew", "NAME --token N [--ttl D]", g, stderr)
	token := fs.Uint64("token", 0, "the lease's token (required)")
	ttl := duration(fs, "ttl", 0, "new TTL (default: the lease's current TTL)")
	pos, err := parseExact(fs, args, "NAME")
	if err != nil {
		return usageExit(err)
	}
	if err := requireToken(fs, "renew"); err != nil {
		return fail(g, stdout, stderr, err)
	}
	c, ctx, done, err := g.call(0)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	l, err := c.Renew(ctx, pos[0], fence.Token(*token), *ttl)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout,
		fmt.Sprintf("renewed %s token=%d ttl=%s remaining=%s", l.Name, l.Token, l.TTL, l.Remaining),
		leaseJSON{Name: l.Name, Owner: l.Owner, Token: uint64(l.Token), TTL: jsonDuration(l.TTL), Remaining: jsonDuration(l.Remaining), SignedToken: signedText(l),
			Mode: modeJSON(l.Mode), Permits: l.Permits, Locks: specsJSON(l.Locks)})
	return exitOK
}

// signedText is a renewed lease's signed token, "" when the server sent
// none.
func signedText(l fence.Lease) string {
	if l.Signed.Token == 0 {
		return ""
	}
	return l.Signed.String()
}
