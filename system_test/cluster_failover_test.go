//go:build e2e

package system_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// loadWorker's record of what the cluster acknowledged to it.
type loadWorker struct {
	lock, resource string
	grants         []ackedGrant
	writes         []ackedWrite
	err            error
	cycles         atomic.Int64 // acquire → write → release cycles done
}

type ackedGrant struct {
	token      uint64
	sent, done time.Time
}

type ackedWrite struct {
	value   string
	token   uint64
	version uint64
}

// run loops acquire → fenced write → release on its own lock and resource
// until stop is closed, through f (exact retries on the next node), and
// records every acknowledgement. It finishes the cycle it is in (retrying
// through the failover), so at the end nothing of it is in flight.
func (w *loadWorker) run(ctx context.Context, f *failover, stop <-chan struct{}, acked *atomic.Int64) {
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		sent := time.Now()
		l, err := f.acquire(ctx, w.lock, w.lock, 30*time.Second, 0)
		if err != nil {
			w.err = fmt.Errorf("acquire %s: %w", w.lock, err)
			return
		}
		w.grants = append(w.grants, ackedGrant{l.GetToken(), sent, time.Now()})
		acked.Add(1)
		value := fmt.Sprintf("%s-%d", w.resource, seq)
		st, err := f.write(ctx, w.resource, l.GetToken(), value)
		if err != nil {
			w.err = fmt.Errorf("write %s with %d: %w", w.resource, l.GetToken(), err)
			return
		}
		w.writes = append(w.writes, ackedWrite{value, l.GetToken(), st.GetVersion()})
		acked.Add(1)
		if err := f.release(ctx, w.lock, l.GetToken()); err != nil {
			w.err = fmt.Errorf("release %s %d: %w", w.lock, l.GetToken(), err)
			return
		}
		w.cycles.Add(1)
	}
}

// waitCycles waits until every worker has done n more cycles than it had
// at the call (or one of them has failed, or ctx ends): the load counted in
// acknowledged operations, not in seconds, so that it is there at any
// machine speed.
func waitCycles(ctx context.Context, t *testing.T, workers []*loadWorker, errs func() bool, n int64) {
	t.Helper()
	base := make([]int64, len(workers))
	for i, w := range workers {
		base[i] = w.cycles.Load()
	}
	for {
		done := true
		for i, w := range workers {
			done = done && w.cycles.Load() >= base[i]+n
		}
		if done || errs() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the workers did not do %d cycles each: %v", n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestClusterKillLeaderUnderLoad: kill -9 of the leader of a 3-node cluster
// while workers acquire, write and release through every node. A new leader
// serves; every token granted after the kill is greater than every token
// acknowledged before it (G1 across terms); every acknowledged grant and
// write is still there, each write applied exactly once (G5, G6); and a
// lease that expired during the failover cannot be renewed once another
// client was granted its lock; a Go client's 1s lease is either renewed
// through the failover or reported lost, and then never renewed again.
func TestClusterKillLeaderUnderLoad(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	old := waitLeader(t, c)
	urls := c.URLs()

	// Leases held across the failover (TTL long enough to outlast it).
	setup := newFailover(urls)
	held := map[string]uint64{}
	for i := range 4 {
		name := fmt.Sprintf("kill/held-%d", i)
		l, err := setup.acquire(ctx, name, "holder", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		held[name] = l.GetToken()
	}

	// The load: four workers, each starting on a different node.
	workers := make([]*loadWorker, 4)
	stop := make(chan struct{})
	var acked atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64 // workers that stopped on an error
	for i := range workers {
		w := &loadWorker{lock: fmt.Sprintf("kill/lock-%d", i), resource: fmt.Sprintf("kill/res-%d", i)}
		workers[i] = w
		order := append(slices.Clone(urls[i%len(urls):]), urls[:i%len(urls)]...)
		f := newFailover(order)
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, f, stop, &acked)
			if w.err != nil {
				failed.Add(1)
			}
		}()
	}
	// Load before the kill: every worker has acquired, written and
	// released a few times. (It was a 1s sleep: a slow machine could kill
	// the leader before a worker had anything acknowledged.)
	anyFailed := func() bool { return failed.Load() > 0 }
	waitCycles(ctx, t, workers, anyFailed, 5)

	// A lease that will expire during the failover: TTL 1s, never renewed.
	expiring, err := setup.acquire(ctx, "kill/expiring", "a", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A Go client's lease (TTL 1s, its own keepalive, every node as an
	// endpoint): it is either renewed through the failover in time, or
	// reported lost at its safe deadline and never renewed after it.
	gc, err := client.New(c.Endpoints(), client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	gl, err := gc.Acquire(ctx, "kill/go-client", client.TTL(time.Second), client.Owner("go-client"))
	if err != nil {
		t.Fatal(err)
	}

	if acked.Load() == 0 {
		t.Fatal("the workers had nothing acknowledged before the kill")
	}
	killAt := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	newLeader := waitLeader(t, c, old)
	t.Logf("killed leader %s; %s leads", old.ID(), newLeader.ID())

	// Another client takes the expired lock; the old holder's renew is then
	// refused (no lease renewed on time expired).
	b := newFailover(c.URLs())
	var bLease uint64
	for bLease == 0 {
		l, err := b.acquire(ctx, "kill/expiring", "b", 10*time.Second, 0)
		switch {
		case err == nil:
			bLease = l.GetToken()
		case reason(err) == "BUSY":
			time.Sleep(50 * time.Millisecond)
		default:
			t.Fatalf("B's acquire of the expired lock: %v", err)
		}
	}
	if bLease <= expiring.GetToken() {
		t.Errorf("B's token %d is not above the expired lease's %d", bLease, expiring.GetToken())
	}
	err = b.do(ctx, func(ctx context.Context, a api) error {
		_, err := renewOnce(ctx, a, "kill/expiring", expiring.GetToken())
		return err
	})
	if r := reason(err); r != "LEASE_EXPIRED" && r != "NOT_HOLDER" && r != "STALE_TOKEN" {
		t.Errorf("renew of the expired lease %d after B was granted %d = %v, want it refused (LEASE_EXPIRED, NOT_HOLDER or STALE_TOKEN)", expiring.GetToken(), bLease, err)
	}

	select {
	case <-gl.Done():
		// Lost: its client gave it up, so the lock must go to another.
		if !errors.Is(gl.Err(), client.ErrLeaseLost) {
			t.Errorf("the Go client's lease ended with %v, want lost", gl.Err())
		}
		other := newFailover(c.URLs())
		for {
			g, err := other.acquire(ctx, "kill/go-client", "other", 10*time.Second, 0)
			if err == nil {
				if g.GetToken() <= uint64(gl.Token()) {
					t.Errorf("token %d after the lost lease's %d", g.GetToken(), gl.Token())
				}
				break
			}
			if reason(err) != "BUSY" || ctx.Err() != nil {
				t.Fatalf("acquire of the lost Go client lease's lock: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("the Go client's 1s lease was reported lost in the failover (%v); its lock went to another", gl.Err())
	default:
		// Renewed through the failover: still held with its token.
		li, err := newFailover(c.URLs()).get(ctx, "kill/go-client")
		if err != nil {
			t.Fatal(err)
		}
		if li.GetLease().GetToken() != uint64(gl.Token()) {
			t.Errorf("the Go client holds kill/go-client (token %d) but the cluster has %v", gl.Token(), li)
		}
		t.Logf("the Go client's 1s lease was renewed through the failover")
	}

	// More load on the new leader: every worker does a few more cycles,
	// all of them asked for after the kill. (It was a 1s sleep.)
	waitCycles(ctx, t, workers, anyFailed, 5)
	close(stop)
	wg.Wait()
	for _, w := range workers {
		if w.err != nil {
			t.Fatal(w.err)
		}
	}

	// Tokens: every grant asked for after the kill is above every grant
	// acknowledged before it.
	var maxBefore uint64
	for _, tok := range held {
		maxBefore = max(maxBefore, tok)
	}
	maxBefore = max(maxBefore, expiring.GetToken())
	var after []uint64
	var servedAt time.Time // the first grant asked for after the kill, acknowledged
	seen := map[uint64]string{}
	for _, w := range workers {
		for _, g := range w.grants {
			if prev, dup := seen[g.token]; dup {
				t.Errorf("token %d granted twice (%s and %s)", g.token, prev, w.lock)
			}
			seen[g.token] = w.lock
			if g.done.Before(killAt) {
				maxBefore = max(maxBefore, g.token)
			}
			if g.sent.After(killed) {
				after = append(after, g.token)
				if servedAt.IsZero() || g.done.Before(servedAt) {
					servedAt = g.done
				}
			}
		}
	}
	if len(after) == 0 {
		t.Fatal("no grant was asked for after the kill")
	}
	// Not a performance bound: a hang guard far above "about two election
	// timeouts" (2s); the log line shows the time.
	failover := servedAt.Sub(killed)
	t.Logf("first grant asked for after the kill acknowledged %v after it (election timeout 1s)", failover.Round(time.Millisecond))
	if failover > 20*time.Second {
		t.Errorf("first grant after the kill acknowledged %v after it", failover)
	}
	if m := slices.Min(after); m <= maxBefore {
		t.Errorf("a grant after the failover got token %d, not above %d acknowledged before the kill", m, maxBefore)
	}

	// Every acknowledged grant and write is there; each write applied once.
	check := newFailover(c.URLs())
	for name, tok := range held {
		li, err := check.get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if li.GetLease().GetToken() != tok {
			t.Errorf("lock %s after the failover: %v, want held with token %d", name, li, tok)
		}
	}
	total := 0
	for _, w := range workers {
		total += len(w.writes)
		last := w.writes[len(w.writes)-1]
		st, err := check.read(ctx, w.resource)
		if err != nil {
			t.Fatal(err)
		}
		if string(st.GetValue()) != last.value || st.GetLastToken() != last.token || st.GetVersion() != uint64(len(w.writes)) {
			t.Errorf("%s = %q token %d version %d; want the last acknowledged write %q with token %d, version %d (one per acknowledged write)",
				w.resource, st.GetValue(), st.GetLastToken(), st.GetVersion(), last.value, last.token, len(w.writes))
		}
		li, err := check.get(ctx, w.lock)
		if err != nil {
			t.Fatal(err)
		}
		if li.GetLease() != nil || li.GetLastToken() != w.grants[len(w.grants)-1].token {
			t.Errorf("%s at the end: %v; want free with last token %d", w.lock, li, w.grants[len(w.grants)-1].token)
		}
	}
	t.Logf("%d grants, %d writes acknowledged; %d grants asked for after the kill, all above %d", len(seen), total, len(after), maxBefore)

	// The killed node comes back with its data and catches up.
	if err := old.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitConverged(t, c)
}
