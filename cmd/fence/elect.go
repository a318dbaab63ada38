package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

const electUsage = `NAME --ttl D [--value V] [--owner S] [--grace D] -- CMD ARGS...
       NAME --observe [--json]

Leader election over lock NAME (docs/lock-boundaries.md, "Leader election").
With CMD: campaigns until this process leads (waiting as long as it takes),
proclaims --value as the leader's value (a fenced write of resource NAME with
the leader's token), then runs CMD exactly as fence run does — FENCE_LOCK,
FENCE_TOKEN and FENCE_SIGNED_TOKEN in its environment, the lease kept alive
while CMD runs, CMD stopped when leadership is lost — resigns when CMD exits,
and exits with CMD's status.
With --observe: prints the leader each time it changes (its token, owner and
value; --json: one JSON object a line), until interrupted. Every leader is
printed, however briefly it led; its value only if the store still held it
when read (docs/lock-boundaries.md).
`

// electCmd is `fence elect`: run CMD only while leader, or observe.
func electCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("elect", electUsage, g, stderr)
	ttl := duration(fs, "ttl", 0, "lease TTL (required with CMD); renewed every TTL/3 while CMD runs")
	grace := duration(fs, "grace", 5*time.Second, "as for fence run: SIGTERM this long before the SIGKILL that ends CMD when renewals fail")
	owner := fs.String("owner", "", "owner label (default hostname:pid)")
	value := fs.String("value", "", "the value to proclaim as leader (default: the owner label)")
	observe := fs.Bool("observe", false, "print the leader as it changes instead of campaigning")
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) < 1 {
		fmt.Fprintln(stderr, "fence elect: want NAME")
		fs.Usage()
		return exitUsage
	}
	name := pos[0]
	if err := fence.ValidateName("name", name); err != nil {
		return fail(g, stdout, stderr, err)
	}
	if *observe {
		if len(pos)+len(after) > 1 {
			return fail(g, stdout, stderr, &usageError{"elect --observe takes NAME only, no command"})
		}
		return observeLeader(g, name, stdout, stderr)
	}
	argv := after
	if len(argv) == 0 {
		argv = pos[1:]
	}
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "fence elect: want a command: fence elect NAME --ttl D -- CMD ARGS... (or --observe)")
		fs.Usage()
		return exitUsage
	}
	if !wasSet(fs, "ttl") {
		return fail(g, stdout, stderr, &usageError{"elect: --ttl is required"})
	}
	if *ttl < fence.MinTTL {
		return fail(g, stdout, stderr, fence.Invalid("ttl", "at least "+fence.MinTTL.String(), ttl.String()))
	}
	if *grace < 0 {
		return fail(g, stdout, stderr, fence.Invalid("grace", "at least 0s (0: SIGKILL with no SIGTERM first)", grace.String()))
	}
	c, err := client.New(g.server, g.clientOptions(client.WithSessionTTL(*ttl))...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer c.Close()
	label := *owner
	if label == "" {
		label = client.DefaultOwner()
	}
	opts := []client.AcquireOption{client.Owner(label)}
	v := *value
	if !wasSet(fs, "value") {
		v = label
	}
	// No --timeout: a campaign waits as long as it takes (Ctrl-C ends it).
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := c.Election(name)
	lease, err := e.Campaign(ctx, []byte(v), opts...)
	cancel()
	if err != nil {
		if lease != nil {
			_ = e.Resign(context.Background())
		}
		return fail(g, stdout, stderr, err)
	}
	verifyHeld(lease)
	fmt.Fprintf(stderr, "fence elect: leading %s token=%d\n", name, lease.Token())
	code := superviseChild(lease, argv, *grace, stdout, stderr)
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := e.Resign(rctx); err != nil {
		fmt.Fprintf(stderr, "fence elect: resign %s: %v\n", nameHuman(name), err)
	}
	return code
}

// observeLeader prints election name's leader each time it changes.
func observeLeader(g *globals, name string, stdout, stderr io.Writer) int {
	c, err := client.New(g.server, g.clientOptions(client.WithoutSession())...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer c.Close()
	// No --timeout: observing runs until interrupted (as fence watch).
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	for ld := range c.Election(name).Observe(ctx) {
		if ld.Err != nil {
			if errors.Is(ld.Err, context.Canceled) || ctx.Err() != nil {
				return exitOK
			}
			return fail(g, stdout, stderr, ld.Err)
		}
		if g.json {
			b, _ := json.Marshal(map[string]any{"name": name, "token": ld.Token, "owner": ld.Owner, "value": string(ld.Value), "leader": ld.Token != 0})
			fmt.Fprintln(stdout, string(b))
			continue
		}
		if ld.Token == 0 {
			fmt.Fprintf(stdout, "no leader of %s\n", nameHuman(name))
			continue
		}
		fmt.Fprintf(stdout, "leader of %s token=%d owner=%s value=%q\n", nameHuman(name), ld.Token, ld.Owner, ld.Value)
	}
	return exitOK
}
