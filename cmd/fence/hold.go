package main

import (
	"context"
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

// holdJSON is the --json output of hold: one object when the lock is held,
// one when hold ends.
type holdJSON struct {
	Name     string `json:"name"`
	Owner    string `json:"owner"`
	Token    uint64 `json:"token"`
	TTL      string `json:"ttl"`
	Holding  bool   `json:"holding"`
	Released bool   `json:"released,omitempty"`
	Lost     string `json:"lost,omitempty"`
}

// holdCmd takes lock NAME and holds it, renewing it in the background,
// until SIGINT (Ctrl-C) or SIGTERM; then it releases it and exits 0. Like
// `etcdctl lock NAME` without a command. If the lease is lost meanwhile it
// says so and exits 1.
func holdCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("hold", `NAME... [--ttl D] [--wait D] [--owner S] [--shared] [--permits N] [--shared-lock NAME]...

Takes lock NAME (several NAMEs: one set, all at once or none; --shared,
--permits N and --shared-lock NAME as for fence acquire) — waiting while it is held, up to --wait (default 24h, the
longest wait the server allows; --wait 0 tries once and exits 3 when it is
held) — and holds it, renewed in the background, until SIGINT (Ctrl-C) or
SIGTERM; then releases it and exits 0 (1 if the lease was lost meanwhile).
`, g, stderr)
	ttl := duration(fs, "ttl", client.DefaultTTL, "lease TTL, renewed every TTL/3 while held")
	wait := duration(fs, "wait", fence.MaxWait, "while the lock is held, queue for it up to this long (the default is the longest wait the server allows), then exit 3 (BUSY); 0: try once")
	owner := fs.String("owner", "", "owner label (default hostname:pid)")
	lf := addLockFlags(fs)
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	pos = append(pos, after...)
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "fence hold: want NAME (several: one set)")
		fs.Usage()
		return exitUsage
	}
	specs, err := lf.specs(pos)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	// Signals are caught from the start, so that one just after the grant
	// releases the lock (one during the wait abandons it: acquireKept).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	c, lease, err := g.acquireKept(specs, *ttl, *wait, *owner)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer c.Close()
	out := holdJSON{Name: lease.Name(), Owner: lease.Owner(), Token: uint64(lease.Token()), TTL: jsonDuration(lease.TTL()), Holding: true}
	emit(g, stdout, fmt.Sprintf("holding %s token=%d ttl=%s (Ctrl-C to release)", leaseHuman(lease), lease.Token(), lease.TTL()), out)

	select {
	case <-sigs:
	case <-lease.Done():
		out.Holding, out.Lost = false, lease.Err().Error()
		if g.json {
			emit(g, stdout, "", out)
		}
		return fail(g, io.Discard, stderr, fmt.Errorf("hold %s: %w", lease.Name(), lease.Err()))
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	if err := lease.Release(rctx); err != nil {
		if errors.Is(err, client.ErrLeaseLost) {
			out.Lost = err.Error()
		}
		out.Holding = false
		if g.json {
			emit(g, stdout, "", out)
		}
		return fail(g, io.Discard, stderr, fmt.Errorf("hold %s: release: %w", lease.Name(), err))
	}
	out.Holding, out.Released = false, true
	emit(g, stdout, fmt.Sprintf("released %s token=%d", nameHuman(lease.Name()), lease.Token()), out)
	return exitOK
}
