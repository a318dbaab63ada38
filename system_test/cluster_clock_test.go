//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// skewDrift is the documented drift (fence.DefaultDrift, design.md §2): a
// leader clock may run fast by up to 1 % and end a lease that much early
// in real time; the client's safe deadline subtracts it.
const skewDrift = 0.01

// skewEnv are the test-only clock hooks of each node: an hour ahead, an
// hour behind, and a fast and a slow monotonic rate within the drift.
var skewEnv = map[string][]string{
	"fence-1": {"FENCE_TEST_CLOCK_OFFSET=1h", "FENCE_TEST_CLOCK_RATE=1.005"},
	"fence-2": {"FENCE_TEST_CLOCK_OFFSET=-1h", "FENCE_TEST_CLOCK_RATE=0.995"},
	"fence-3": {"FENCE_TEST_CLOCK_OFFSET=1h"},
}

// TestClusterSkewedClocksShortenNoLease: three nodes whose clocks are an
// hour ahead or behind and run up to 0.5 % fast or slow. Leadership is
// moved to each in turn. Two leases are granted there: one (TTL 1s) that
// ends under that leader, and one (TTL 3s) that is handed across a change
// of leader half-way (to the next skewed node). Another client polls for
// each lock. Measured on this test's monotonic clock, no lock is granted
// again before TTL × (1 − drift) has passed since its first grant was
// sent (the grant was committed after that): skew shortens no lease. Each
// is granted again eventually (no lease lasts an hour either).
func TestClusterSkewedClocksShortenNoLease(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	cfg := clusterConfig(3)
	cfg.NodeEnv = func(id string) []string { return skewEnv[id] }
	c := harness.StartClusterT(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangGuard)
	defer cancel()
	const short, long = time.Second, 3 * time.Second
	nodes := c.Nodes()
	for i, n := range nodes {
		if _, err := c.Transfer(ctx, n); err != nil {
			t.Fatal(err)
		}
		holder := newFailover([]string{n.URL()})
		a, aSent := skewAcquire(ctx, t, holder, fmt.Sprintf("skew/a-%d", i), short)

		// The short lease ends under the leader that granted it.
		other := newFailover(c.URLs())
		checkNotEarly(ctx, t, other, a, aSent, short, n.ID()+" alone")

		// The long one is handed to the next skewed node half-way. The
		// handover must land while the lease can still be held (before
		// TTL × (1 − drift) from its send, on this test's clock); on a
		// machine too slow for that the round proves nothing and is
		// played again with twice the TTL (up to 16×: a hang guard).
		next := nodes[(i+1)%len(nodes)]
		for ttl, round := long, 0; ; ttl, round = 2*ttl, round+1 {
			if ttl > 16*long {
				t.Fatalf("no leadership transfer landed within a lease's first %v even with TTL %v", 1-skewDrift, ttl/2)
			}
			if round > 0 { // leadership back onto n, where the lease is granted
				if _, err := c.Transfer(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			b, bSent := skewAcquire(ctx, t, holder, fmt.Sprintf("skew/b-%d-%d", i, round), ttl)
			time.Sleep(time.Until(bSent.Add(ttl / 2)))
			if _, err := c.Transfer(ctx, next); err != nil {
				t.Fatal(err)
			}
			if time.Since(bSent) >= time.Duration(float64(ttl)*(1-skewDrift)) {
				t.Logf("the transfer to %s landed %v after the %v lease was sent: again with twice the TTL", next.ID(), time.Since(bSent), ttl)
				continue
			}
			checkNotEarly(ctx, t, other, b, bSent, ttl, n.ID()+", then "+next.ID())
			break
		}
	}
}

type skewLease struct {
	name  string
	token uint64
}

func skewAcquire(ctx context.Context, t *testing.T, f *failover, name string, ttl time.Duration) (skewLease, time.Time) {
	t.Helper()
	sent := time.Now()
	l, err := f.acquire(ctx, name, "holder", ttl, 0)
	if err != nil {
		t.Fatal(err)
	}
	return skewLease{name, l.GetToken()}, sent
}

// checkNotEarly polls for l's lock through f until it is granted, and fails
// t if that grant returned before sent + ttl × (1 − skewDrift): certainly
// an early end of the lease.
func checkNotEarly(ctx context.Context, t *testing.T, f *failover, l skewLease, sent time.Time, ttl time.Duration, leaders string) {
	t.Helper()
	var got time.Time
	var token uint64
	for got.IsZero() {
		g, err := f.acquire(ctx, l.name, "other", time.Second, 0)
		switch {
		case err == nil:
			got, token = time.Now(), g.GetToken()
		case reason(err) == "BUSY":
			time.Sleep(10 * time.Millisecond)
		default:
			t.Fatalf("the other client's acquire of %s: %v", l.name, err)
		}
		if time.Since(sent) > ttl+hangGuard/3 {
			t.Fatalf("%s still held %v after its grant (TTL %v)", l.name, time.Since(sent), ttl)
		}
	}
	earliest := sent.Add(time.Duration(float64(ttl) * (1 - skewDrift)))
	t.Logf("%s (token %d, TTL %v, led by %s): granted again %v after its send", l.name, l.token, ttl, leaders, got.Sub(sent).Round(time.Millisecond))
	if got.Before(earliest) {
		t.Errorf("%s (TTL %v, led by %s) was granted again (token %d) %v after its grant was sent: before TTL × (1 − %v) = %v",
			l.name, ttl, leaders, token, got.Sub(sent), skewDrift, earliest.Sub(sent))
	}
}
