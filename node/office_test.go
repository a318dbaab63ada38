package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A leader that cannot take office (its barrier or rules proposal fails)
// must not lead forever without serving: its followers hear from it and
// would never elect another. Leadership moved to a node whose attempts
// all fail: after twice the election timeout it hands leadership on, and
// another node takes office and serves.
func TestClusterLeaderThatCannotTakeOfficeHandsOver(t *testing.T) {
	var failFor atomic.Value // node id whose attempts fail
	failFor.Store("")
	var attempts atomic.Int64
	tc := startCluster(t, clusterOpts{n: 3, tweak: func(c *Config) {
		id := c.NodeID
		c.officeHook = func() error {
			if failFor.Load() == id {
				attempts.Add(1)
				return errors.New("injected: barrier failed")
			}
			return nil
		}
	}})
	lead := tc.leader()
	b := tc.others(lead)[0]
	failFor.Store(b.id)
	if err := lead.node.TransferLeadership(context.Background(), b.id); err != nil {
		t.Fatalf("transfer to %s: %v", b.id, err)
	}
	next := tc.leader() // hang guard inside: clusterWait
	if next == b {
		t.Fatalf("%s is in office although every attempt of it fails", b.id)
	}
	if attempts.Load() < 2 {
		t.Fatalf("%s tried to take office %d times, want retries before handing over", b.id, attempts.Load())
	}
	grant(t, next.node, "served")
}

// A single node whose first attempts to take office fail tries again and
// opens (nobody else could lead).
func TestTakeOfficeRetried(t *testing.T) {
	var left atomic.Int64
	left.Store(2)
	n, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), ReadyTimeout: 10 * time.Second,
		officeHook: func() error {
			if left.Add(-1) >= 0 {
				return errors.New("injected: barrier failed")
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("Open with two failed attempts to take office: %v", err)
	}
	defer n.Close()
	mustApply(t, n, acquire("a", time.Hour))
}
