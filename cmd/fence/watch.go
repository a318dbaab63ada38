package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fenceworks/fence/client"
)

// watchCmd follows the locks under PREFIX (or one lock, --name) until
// Ctrl-C: a line per event, or with --json one JSON object per line. It
// reconnects by itself and resumes after the last position (client.Watch);
// --timeout does not apply.
func watchCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", "[PREFIX] [--name] [--after POS]", g, stderr)
	after := fs.String("after", "", "resume after this position (an event's position): the changes since, or the state if they are gone")
	name := fs.Bool("name", false, "follow the one lock named PREFIX, not a prefix")
	pos, rest, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	pos = append(pos, rest...)
	if len(pos) > 1 {
		fs.Usage()
		return exitUsage
	}
	prefix := ""
	if len(pos) == 1 {
		prefix = pos[0]
	}
	c, err := client.New(g.server, g.clientOptions()...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var opts []client.WatchOption
	if *after != "" {
		opts = append(opts, client.WatchAfter(*after))
	}
	if *name {
		opts = append(opts, client.WatchName())
	}
	events, err := c.Watch(ctx, prefix, opts...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	enc := json.NewEncoder(stdout)
	for e := range events {
		if e.Err != nil {
			return fail(g, stdout, stderr, e.Err)
		}
		if g.json {
			_ = enc.Encode(watchEventJSON(e))
			continue
		}
		printWatchEvent(stdout, e)
	}
	return exitOK
}

// watchEventJSON is e in the API's JSON shape (a WatchEvent; tokens as
// numbers).
func watchEventJSON(e client.WatchEvent) map[string]any {
	out := map[string]any{"position": e.Position, "index": e.Index}
	if s := e.State; s != nil {
		locks := []map[string]any{}
		for _, l := range s.Locks {
			holders := []map[string]any{}
			for _, h := range l.Holders {
				holders = append(holders, map[string]any{"token": uint64(h.Token), "owner": h.Owner, "mode": h.Mode, "remaining": jsonDuration(h.Remaining)})
			}
			locks = append(locks, map[string]any{"name": l.Name, "holders": holders, "waiters": l.Waiters})
		}
		st := map[string]any{"locks": locks}
		if s.HistoryGone {
			st["historyGone"] = true
		}
		out["state"] = st
	}
	if c := e.Change; c != nil {
		ch := map[string]any{"kind": c.Kind, "name": c.Name, "token": uint64(c.Token), "owner": c.Owner, "mode": c.Mode,
			"holders": c.Holders, "waiters": c.Waiters}
		if c.Principal != "" {
			ch["principal"] = c.Principal
		}
		if c.Permits != 0 {
			ch["permits"] = c.Permits
		}
		if c.Session != 0 {
			ch["session"] = c.Session
		}
		if c.TTL != 0 {
			ch["ttl"] = jsonDuration(c.TTL)
		}
		if c.RequestID != "" {
			ch["requestId"] = c.RequestID
		}
		if c.Version != 0 {
			ch["version"] = c.Version
		}
		if c.LastAccepted != 0 {
			ch["lastAccepted"] = uint64(c.LastAccepted)
		}
		out["change"] = ch
	}
	return out
}

// printWatchEvent writes e as human lines.
func printWatchEvent(w io.Writer, e client.WatchEvent) {
	if s := e.State; s != nil {
		gone := ""
		if s.HistoryGone {
			gone = " (the history asked for is gone: this is the current state)"
		}
		fmt.Fprintf(w, "%s state: %d locks%s\n", e.Position, len(s.Locks), gone)
		for _, l := range s.Locks {
			if len(l.Holders) == 0 {
				fmt.Fprintf(w, "  %s free, %d waiting\n", nameHuman(l.Name), l.Waiters)
			}
			for _, h := range l.Holders {
				fmt.Fprintf(w, "  %s held by %s token %d (%s, %s left), %d waiting\n", nameHuman(l.Name), nameHuman(h.Owner), h.Token, h.Mode, h.Remaining.Round(time.Millisecond), l.Waiters)
			}
		}
		return
	}
	if c := e.Change; c != nil {
		what := fmt.Sprintf("token %d by %s", c.Token, nameHuman(c.Owner))
		switch c.Kind {
		case "queued", "left_queue":
			what = "by " + nameHuman(c.Owner)
		case "written":
			what = fmt.Sprintf("token %d, version %d", c.Token, c.Version)
		case "refused":
			what = fmt.Sprintf("token %d (stale: it accepted token %d)", c.Token, c.LastAccepted)
		}
		fmt.Fprintf(w, "%s %s %s %s (holders %d, waiting %d)\n", e.Position, nameHuman(c.Name), c.Kind, what, c.Holders, c.Waiters)
	}
}
