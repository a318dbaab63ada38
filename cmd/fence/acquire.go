package main

import (
	"crypto/rand"
	"fmt"
	"github.com/fenceworks/fence"
	"io"

	"github.com/fenceworks/fence/client"
)

// acquireJSON is the --json output of acquire and run.
type acquireJSON struct {
	Name      string `json:"name"`
	Owner     string `json:"owner"`
	Token     uint64 `json:"token"`
	TTL       string `json:"ttl"`
	RequestID string `json:"requestId"`
	// SignedToken is the token with its proof (Lease.SignedToken): the
	// value to hand a guard with the cluster's key set.
	SignedToken string `json:"signedToken,omitempty"`
}

// acquireCmd takes a lock and prints its token. The lease is not kept alive:
// it lives for its TTL unless renewed (fence renew) or released.
func acquireCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("acquire", "NAME --ttl D [--owner S] [--wait D] [--request-id S] [--lock-delay D]", g, stderr)
	ttl := duration(fs, "ttl", 0, "lease TTL (required)")
	owner := fs.String("owner", "", "owner label (default hostname:pid)")
	wait := duration(fs, "wait", 0, "queue for the lock up to this long (0: try once)")
	requestID := fs.String("request-id", "", "idempotency key: repeat it to get the same lease (default: random)")
	lockDelay := duration(fs, "lock-delay", 0, "after this lease expires, keep the lock free this long")
	pos, err := parseExact(fs, args, "NAME")
	if err != nil {
		return usageExit(err)
	}
	if !wasSet(fs, "ttl") {
		return fail(g, stdout, stderr, &usageError{"acquire: --ttl is required"})
	}
	if *ttl < fence.MinTTL { // 0 would read as "not set" once in a request
		return fail(g, stdout, stderr, fence.Invalid("ttl", "at least "+fence.MinTTL.String(), ttl.String()))
	}
	if *requestID == "" {
		*requestID = rand.Text()
	}
	opts := []client.AcquireOption{client.TTL(*ttl), client.Wait(*wait), client.LockDelay(*lockDelay),
		client.RequestID(*requestID), client.KeepAlive(-1)}
	if *owner != "" {
		opts = append(opts, client.Owner(*owner))
	}
	c, ctx, done, err := g.call(*wait)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	defer done()
	lease, err := c.Acquire(ctx, pos[0], opts...)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout,
		fmt.Sprintf("acquired %s token=%d ttl=%s", nameHuman(lease.Name()), lease.Token(), lease.TTL()),
		acquireJSON{Name: lease.Name(), Owner: lease.Owner(), Token: uint64(lease.Token()),
			TTL: jsonDuration(lease.TTL()), RequestID: *requestID, SignedToken: lease.SignedToken().String()})
	return exitOK
}

// leaseJSON is the --json output of renew.
type leaseJSON struct {
	Name      string `json:"name"`
	Owner     string `json:"owner"`
	Token     uint64 `json:"token"`
	TTL       string `json:"ttl"`
	Remaining string `json:"remaining"`
	// SignedToken: renew only (Get and List leases are not read by the
	// CLI with their proofs).
	SignedToken string `json:"signedToken,omitempty"`
}
