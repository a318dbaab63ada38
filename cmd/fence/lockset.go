package main

import (
	"context"
	"encoding/json"
	"flag"
	"strconv"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// lockFlags are the lock-boundary flags of acquire, hold and run (issue
// 23): the locks named on the command line are taken in --shared mode or
// as one of --permits N permits; --shared-lock NAME (repeatable) adds a
// lock taken shared. Several locks in all are one set: granted at once or
// not at all, under one lease and one token.
//
// A flag rather than a suffix of the name ("catalog:shared"): a lock name
// may hold any character, ':' included, so a suffix would make some names
// impossible to take exclusively.
type lockFlags struct {
	shared      *bool
	permits     *uint
	sharedLocks stringList
}

func addLockFlags(fs *flag.FlagSet) *lockFlags {
	lf := &lockFlags{
		shared:  fs.Bool("shared", false, "take the named lock(s) shared: beside other shared holders, never beside an exclusive one"),
		permits: fs.Uint("permits", 0, "take one of N permits of the named lock(s): at most N holders at once, each with its own token (every holder must name the same N)"),
	}
	fs.Var(&lf.sharedLocks, "shared-lock", "also take `NAME` shared, in the same set (repeatable): e.g. sku/42 --shared-lock catalog")
	return lf
}

// specs are the locks names and the flags ask for, in the order given
// (the named locks, then every --shared-lock). A permit count beyond
// uint32 is refused naming permits, as the API's bound would.
func (lf *lockFlags) specs(names []string) ([]fence.LockSpec, error) {
	if *lf.permits > fence.MaxPermits {
		return nil, fence.Invalid("permits", "at most "+strconv.Itoa(fence.MaxPermits), strconv.FormatUint(uint64(*lf.permits), 10))
	}
	mode := fence.Exclusive
	if *lf.shared {
		mode = fence.Shared
	}
	out := make([]fence.LockSpec, 0, len(names)+len(lf.sharedLocks))
	for _, n := range names {
		out = append(out, fence.LockSpec{Name: n, Mode: mode, Permits: uint32(*lf.permits)})
	}
	for _, n := range lf.sharedLocks {
		out = append(out, fence.LockSpec{Name: n, Mode: fence.Shared})
	}
	return out, nil
}

// acquireSpecs takes one lock (Acquire with its mode and permits) or a set
// (AcquireSet).
func acquireSpecs(ctx context.Context, c *client.Client, specs []fence.LockSpec, opts []client.AcquireOption) (*client.Lease, error) {
	if len(specs) == 1 {
		s := specs[0]
		if s.Mode == fence.Shared {
			opts = append(opts, client.Shared())
		}
		if s.Permits > 0 {
			opts = append(opts, client.Permits(s.Permits))
		}
		return c.Acquire(ctx, s.Name, opts...)
	}
	return c.AcquireSet(ctx, specs, opts...)
}

// lockSpecJSON is one lock of a set in --json output.
type lockSpecJSON struct {
	Name    string `json:"name"`
	Mode    string `json:"mode,omitempty"`
	Permits uint32 `json:"permits,omitempty"`
}

func specsJSON(specs []fence.LockSpec) []lockSpecJSON {
	if len(specs) == 0 {
		return nil
	}
	out := make([]lockSpecJSON, len(specs))
	for i, s := range specs {
		out[i] = lockSpecJSON{Name: s.Name, Mode: modeJSON(s.Mode), Permits: s.Permits}
	}
	return out
}

// modeJSON is a mode as the API's JSON writes it: absent when exclusive.
func modeJSON(m fence.Mode) string {
	if m == fence.Exclusive {
		return ""
	}
	return m.String()
}

func proofsText(proofs []fence.SignedToken) []string {
	if len(proofs) == 0 {
		return nil
	}
	out := make([]string, len(proofs))
	for i, p := range proofs {
		out[i] = p.String()
	}
	return out
}

// leaseLocksEnv is what fence run adds to its child's environment for a
// set's lease: FENCE_LOCKS, the set's names, and FENCE_PROOFS, each lock's
// signed token in the same order, as JSON arrays (a lock name may hold any
// character: JSON is the one list every language reads).
func leaseLocksEnv(lease *client.Lease) []string {
	locks := lease.Locks()
	if len(locks) == 0 {
		return nil
	}
	names := make([]string, len(locks))
	for i, s := range locks {
		names[i] = s.Name
	}
	n, _ := json.Marshal(names)
	p, _ := json.Marshal(proofsText(lease.Proofs()))
	return []string{"FENCE_LOCKS=" + string(n), "FENCE_PROOFS=" + string(p)}
}

// leaseHuman names what a lease holds for people: its lock with its mode
// or permits ("report (shared)", "exchange (1 of 4 permits)"), or a set's
// locks, comma-separated.
func leaseHuman(lease *client.Lease) string {
	one := func(s fence.LockSpec) string {
		out := nameHuman(s.Name)
		switch {
		case s.Permits > 0:
			out += " (1 of " + strconv.FormatUint(uint64(s.Permits), 10) + " permits)"
		case s.Mode == fence.Shared:
			out += " (shared)"
		}
		return out
	}
	locks := lease.Locks()
	if len(locks) == 0 {
		return one(fence.LockSpec{Name: lease.Name(), Mode: lease.Mode(), Permits: lease.Permits()})
	}
	out := ""
	for i, s := range locks {
		if i > 0 {
			out += ", "
		}
		out += one(s)
	}
	return out
}
