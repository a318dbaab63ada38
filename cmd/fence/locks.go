package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// lockJSON is one lock in the --json output of locks.
type lockJSON struct {
	Name               string     `json:"name"`
	Lease              *leaseJSON `json:"lease,omitempty"`
	Waiters            int        `json:"waiters"`
	LockDelayRemaining string     `json:"lockDelayRemaining,omitempty"`
	LastToken          uint64     `json:"lastToken"`
	// Every lease holding the lock (shared or permit holders; a set's
	// lease on each of its locks), and its permit count (0: absent).
	Holders []leaseJSON `json:"holders,omitempty"`
	Permits uint32      `json:"permits,omitempty"`
}

func holderJSON(l fence.Lease) leaseJSON {
	return leaseJSON{Name: l.Name, Owner: l.Owner, Token: uint64(l.Token), TTL: jsonDuration(l.TTL), Remaining: jsonDuration(l.Remaining),
		Mode: modeJSON(l.Mode), Permits: l.Permits, Locks: specsJSON(l.Locks)}
}

// heldAs is how lease l holds lock name, for the MODE column: exclusive,
// shared, or "permits N"; a set's lease says "set of N" after it.
func heldAs(l fence.Lease, name string) string {
	spec := fence.LockSpec{Name: l.Name, Mode: l.Mode, Permits: l.Permits}
	for _, s := range l.Locks {
		if s.Name == name {
			spec = s
		}
	}
	out := spec.Mode.String()
	if spec.Permits > 0 {
		out = "permits " + strconv.FormatUint(uint64(spec.Permits), 10)
	}
	if len(l.Locks) > 1 {
		out += " (set of " + strconv.Itoa(len(l.Locks)) + ")"
	}
	return out
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
	fmt.Fprintln(tw, "NAME\tTOKEN\tOWNER\tREMAINING\tWAITERS\tMODE")
	for _, l := range locks {
		j := lockJSON{Name: l.Name, Waiters: l.Waiters, LastToken: uint64(l.LastToken), Permits: l.Permits}
		if l.LockDelayRemaining > 0 {
			j.LockDelayRemaining = jsonDuration(l.LockDelayRemaining)
		}
		holders := l.Holders
		if len(holders) == 0 && l.Lease != nil {
			holders = []fence.Lease{*l.Lease}
		}
		for _, h := range l.Holders {
			j.Holders = append(j.Holders, holderJSON(h))
		}
		if l.Lease != nil {
			lj := holderJSON(*l.Lease)
			j.Lease = &lj
		}
		// One row per holder (a shared or permit lock has several), the
		// name on each; a free lock has one row.
		if len(holders) == 0 {
			remaining := "-"
			if l.LockDelayRemaining > 0 {
				remaining = "delay " + l.LockDelayRemaining.Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t-\t-\t%s\t%d\t-\n", nameHuman(l.Name), remaining, l.Waiters)
		}
		for _, h := range holders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", nameHuman(l.Name), h.Token, nameHuman(h.Owner),
				h.Remaining.Round(time.Millisecond), l.Waiters, heldAs(h, l.Name))
		}
		out = append(out, j)
	}
	tw.Flush()
	emit(g, stdout, strings.TrimSuffix(b.String(), "\n"), map[string]any{"locks": out})
	return exitOK
}
