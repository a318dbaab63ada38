package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// A System is one lock service as a Go program uses it, through its own Go
// client. The runner measures every System with the same workloads; adding
// a system (the session path of the Fence client, say) is one Register call.
type System interface {
	// Name is the system's row label in the tables ("fence-unary", "etcd").
	Name() string
	// Server names the server process the system talks to: "fence",
	// "etcd", "redis-always" or "redis-everysec".
	Server() string
	// Fenced reports whether the system's write in the fenced-write
	// workload is refused for a stale owner (Redis' plain SET is not).
	Fenced() bool
	// Open returns a client for up to workers concurrent workers against
	// the server at addr (host:port).
	Open(ctx context.Context, addr string, workers int) (Client, error)
}

// Client is one process's client of a System.
type Client interface {
	// Worker returns the handle of worker i (0 <= i < workers): for etcd
	// its own concurrency.Session (sessions are shared by workers beyond 64).
	Worker(ctx context.Context, i int) (Worker, error)
	// Queued reports how many acquires wait on the locks whose names start
	// with prefix (there are locks of them, each held), as far as the
	// system can tell: the storm workload waits until all of its waiters
	// are queued before the holders' TTL ends.
	Queued(ctx context.Context, prefix string, locks int) (int, error)
	Close() error
}

// AcquireOpts says how to acquire.
type AcquireOpts struct {
	// TTL of the lease (0: the system's default for the workload). Systems
	// whose TTL belongs to a session (etcd) ignore it.
	TTL time.Duration
	// Deadline, when set, is the absolute time at which the lease's TTL
	// should end (TTL = Deadline − now at the call); systems whose TTL
	// belongs to a session ignore it and end the TTL in Worker.Expire.
	Deadline time.Time
	// Wait > 0 waits for a held lock up to Wait (a FIFO queue on the
	// server, or polling for Redis); 0 tries once.
	Wait time.Duration
	// Hold: the lease will be held without work for a long time; keep it
	// as cheaply as the system allows (Fence unary: no keepalive).
	Hold bool
}

// Worker acquires locks for one worker.
type Worker interface {
	Acquire(ctx context.Context, name string, o AcquireOpts) (Held, error)
	// Expire stops renewing everything this worker holds and returns the
	// time at which its TTL ends; the zero time means the leases carry
	// their own Deadline.
	Expire(ctx context.Context) (time.Time, error)
	Close() error
}

// Held is one held lock.
type Held interface {
	// Write stores val under key guarded by the lock (fenced where the
	// system can fence).
	Write(ctx context.Context, key string, val []byte) error
	Release(ctx context.Context) error
}

var registry = map[string]System{}

// Register adds a system to the runner. It panics on a duplicate name.
func Register(s System) {
	if _, dup := registry[s.Name()]; dup {
		panic("bench: system registered twice: " + s.Name())
	}
	registry[s.Name()] = s
}

// order is the fixed order systems run in within a round.
var order = []string{"fence-unary", "fence-session", "fence-lean", "fence-session-tls", "fence-session-tls-auth", "etcd", "redis-always", "redis-everysec"}

// Systems returns the registered systems named in names (comma-separated;
// "" or "all": every registered one), in the runner's order.
func Systems(names string) ([]System, error) {
	want := map[string]bool{}
	if names != "" && names != "all" {
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			if _, ok := registry[n]; !ok {
				return nil, fmt.Errorf("unknown system %q (registered: %s)", n, strings.Join(Registered(), ", "))
			}
			want[n] = true
		}
	}
	var out []System
	for _, n := range order {
		if s, ok := registry[n]; ok && (len(want) == 0 || want[n]) {
			out = append(out, s)
		}
	}
	return out, nil
}

// Registered lists the registered system names, sorted.
func Registered() []string {
	var ns []string
	for n := range registry {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// ttlFor is the TTL of an acquire with o at now.
func ttlFor(o AcquireOpts, def time.Duration) time.Duration {
	if !o.Deadline.IsZero() {
		return max(time.Until(o.Deadline), 10*time.Millisecond)
	}
	if o.TTL > 0 {
		return o.TTL
	}
	return def
}
