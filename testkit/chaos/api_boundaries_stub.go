//go:build !api23

package chaos

import (
	"context"
	"errors"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// boundariesAPI: this build lacks the Go client's lock boundaries (issue
// 23); the workloads that need them refuse to start (build with -tags
// api23 on a tree that has them). Delete this file once they are on main.
const boundariesAPI = false

var errNoBoundaries = errors.New("chaos: this build has no lock boundaries in the Go client (issue 23): build with -tags api23")

func acquireWant(ctx context.Context, cl *client.Client, wt want, opts []client.AcquireOption) (*client.Lease, error) {
	if len(wt.set) > 0 || wt.mode != "" || wt.permits > 0 {
		return nil, errNoBoundaries
	}
	return cl.Acquire(ctx, wt.name, opts...)
}

func grantedLocks(*client.Lease) []LockRef { return nil }

func leaseProofFor(l *client.Lease, _ string) fence.SignedToken { return l.SignedToken() }
