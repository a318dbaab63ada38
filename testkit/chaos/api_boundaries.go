//go:build api23

package chaos

import (
	"context"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// boundariesAPI: this build has the Go client's lock boundaries (issue 23:
// Client.AcquireSet, Shared, Permits, Lease.Locks and ProofFor).
//
// TODO(issue 23): once the client's lock boundaries are on main, drop the
// api23 tag here and delete api_boundaries_stub.go.
const boundariesAPI = true

// acquireWant acquires what wt asks for: one lock (with its mode and
// permits) or a set, listed in wt.listed's order.
func acquireWant(ctx context.Context, cl *client.Client, wt want, opts []client.AcquireOption) (*client.Lease, error) {
	if len(wt.set) > 0 {
		specs := make([]fence.LockSpec, len(wt.listed))
		for i, r := range wt.listed {
			specs[i] = fence.LockSpec{Name: r.Name, Permits: r.Permits}
			if r.Mode == ModeShared {
				specs[i].Mode = fence.Shared
			}
		}
		return cl.AcquireSet(ctx, specs, opts...)
	}
	if wt.mode == ModeShared {
		opts = append(opts, client.Shared())
	}
	if wt.permits > 0 {
		opts = append(opts, client.Permits(wt.permits))
	}
	return cl.Acquire(ctx, wt.name, opts...)
}

// grantedLocks is what a set's lease lists: its locks, each with the token
// of its proof for it.
func grantedLocks(l *client.Lease) []LockRef {
	var out []LockRef
	for _, s := range l.Locks() {
		r := LockRef{Name: s.Name, Permits: s.Permits, Proof: uint64(l.ProofFor(s.Name).Token)}
		if s.Mode == fence.Shared {
			r.Mode = ModeShared
		}
		out = append(out, r)
	}
	return out
}

// leaseProofFor is the lease's proof for lock name.
func leaseProofFor(l *client.Lease, name string) fence.SignedToken { return l.ProofFor(name) }
