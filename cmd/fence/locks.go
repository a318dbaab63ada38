package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// lockJSON is one lock in the --json output of locks.
type lockJSON struct {
	Name               string     `json:"name"`
	Lease              *leaseJSON `json:"lease,omitempty"`
	Waiters            int        `json:"waiters"`
	LockDelayRemaining string     `json:"lock_delay_remaining,omitempty"`
	LastToken          uint64     `json:"last_token"`
}

// locksCmd lists the locks whose names start with PREFIX.
func locksCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("locks", "[PREFIX]", g, stderr)
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	pos = append(pos, after...)
	if len(pos) > 1 {
		fs.Usage()
		return exitUsage
	}
	prefix := strings.Join(pos, "")
	c, ctx, done, err := g.call(0)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	locks, err := c.List(ctx, prefix)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	out := make([]lockJSON, 0, len(locks))
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTOKEN\tOWNER\tREMAINING\tWAITERS")
	for _, l := range locks {
		j := lockJSON{Name: l.Name, Waiters: l.Waiters, LastToken: uint64(l.LastToken)}
		if l.LockDelayRemaining > 0 {
			j.LockDelayRemaining = l.LockDelayRemaining.String()
		}
		token, owner, remaining := "-", "-", "-"
		if l.Lease != nil {
			j.Lease = &leaseJSON{Name: l.Lease.Name, Owner: l.Lease.Owner, Token: uint64(l.Lease.Token),
				TTL: l.Lease.TTL.String(), Remaining: l.Lease.Remaining.String()}
			token, owner, remaining = l.Lease.Token.String(), l.Lease.Owner, l.Lease.Remaining.Round(time.Millisecond).String()
		} else if l.LockDelayRemaining > 0 {
			remaining = "delay " + l.LockDelayRemaining.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", nameHuman(l.Name), token, nameHuman(owner), remaining, l.Waiters)
		out = append(out, j)
	}
	tw.Flush()
	emit(g, stdout, strings.TrimSuffix(b.String(), "\n"), map[string]any{"locks": out})
	return exitOK
}
