package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenceworks/fence/client"
)

// lockJSON is one lock in the --json output of locks.
type lockJSON struct {
	Name               string     `json:"name"`
	Lease              *leaseJSON `json:"lease,omitempty"`
	Waiters            int        `json:"waiters"`
	LockDelayRemaining string     `json:"lockDelayRemaining,omitempty"`
	LastToken          uint64     `json:"lastToken"`
}

// locksCmd lists the locks whose names start with PREFIX, reading every
// page of the server's List.
func locksCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("locks", "[PREFIX] [--page-size N]", g, stderr)
	pageSize := fs.Int("page-size", 0, "locks per List request (0: the server's default, 1000; at most 10000); all pages are printed")
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
	var locks []client.LockInfo
	for token := ""; ; {
		page, next, err := c.ListPage(ctx, prefix, token, *pageSize)
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		locks = append(locks, page...)
		if next == "" {
			break
		}
		token = next
	}
	out := make([]lockJSON, 0, len(locks))
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTOKEN\tOWNER\tREMAINING\tWAITERS")
	for _, l := range locks {
		j := lockJSON{Name: l.Name, Waiters: l.Waiters, LastToken: uint64(l.LastToken)}
		if l.LockDelayRemaining > 0 {
			j.LockDelayRemaining = jsonDuration(l.LockDelayRemaining)
		}
		token, owner, remaining := "-", "-", "-"
		if l.Lease != nil {
			j.Lease = &leaseJSON{Name: l.Lease.Name, Owner: l.Lease.Owner, Token: uint64(l.Lease.Token),
				TTL: jsonDuration(l.Lease.TTL), Remaining: jsonDuration(l.Lease.Remaining)}
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
