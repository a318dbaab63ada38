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
	// How the lease holds name (absent: exclusive, no permits), and a
	// set's locks with one proof per lock (as the API's Lease).
	Mode    string         `json:"mode,omitempty"`
	Permits uint32         `json:"permits,omitempty"`
	Locks   []lockSpecJSON `json:"locks,omitempty"`
	Proofs  []string       `json:"proofs,omitempty"`
}

func newAcquireJSON(lease *client.Lease, requestID string) acquireJSON {
	return acquireJSON{Name: lease.Name(), Owner: lease.Owner(), Token: uint64(lease.Token()),
		TTL: jsonDuration(lease.TTL()), RequestID: requestID, SignedToken: lease.SignedToken().String(),
		Mode: modeJSON(lease.Mode()), Permits: lease.Permits(), Locks: specsJSON(lease.Locks()), Proofs: proofsText(lease.Proofs())}
}

const acquireUsage = `NAME... --ttl D [--shared] [--permits N] [--shared-lock NAME]... [--owner S] [--wait D] [--request-id S] [--lock-delay D]

Takes lock NAME and prints its token; several NAMEs (and every
--shared-lock NAME) are one set, granted all at once or not at all under
one lease and one token (renew or release it by any of its names). --shared
takes the NAMEs shared (beside other shared holders); --permits N takes one
of N permits of each NAME (a semaphore). The lease is not kept alive: it
lives for its TTL unless renewed (fence renew) or released.
`

// acquireCmd takes a lock (or a set of locks) and prints its token. The
// lease is not kept alive: it lives for its TTL unless renewed (fence
// renew) or released.
func acquireCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("acquire", acquireUsage, g, stderr)
	ttl := duration(fs, "ttl", 0, "lease TTL (required)")
	owner := fs.String("owner", "", "owner label (default hostname:pid)")
	wait := duration(fs, "wait", 0, "queue for the lock up to this long (0: try once)")
	requestID := fs.String("request-id", "", "idempotency key: repeat it to get the same lease (default: random)")
	lockDelay := duration(fs, "lock-delay", 0, "after this lease expires, keep the lock free this long")
	lf := addLockFlags(fs)
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	pos = append(pos, after...)
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "fence acquire: want NAME (several: one set)")
		fs.Usage()
		return exitUsage
	}
	specs, err := lf.specs(pos)
	if err != nil {
		return fail(g, stdout, stderr, err)
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
	lease, err := acquireSpecs(ctx, c, specs, opts)
	if err != nil {
		return fail(g, stdout, stderr, err)
	}
	emit(g, stdout,
		fmt.Sprintf("acquired %s token=%d ttl=%s", leaseHuman(lease), lease.Token(), lease.TTL()),
		newAcquireJSON(lease, *requestID))
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
	// How the lease holds its lock, and a set's locks (locks).
	Mode    string         `json:"mode,omitempty"`
	Permits uint32         `json:"permits,omitempty"`
	Locks   []lockSpecJSON `json:"locks,omitempty"`
}
