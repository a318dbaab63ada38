//go:build e2e

package system_test

import (
	"context"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// TestClusterMinorityGrantsNothing: the leader of a 3-node cluster is cut
// off from both peers (a proxy on every directed peer link drops
// everything; FENCE_TEST_DIAL_MAP routes raft and forwarded calls through
// them). On its side it grants nothing and accepts no write, though it led
// a moment ago; the majority elects a leader and serves. After healing,
// the replicas converge and tokens continue upward. An isolated follower
// grants nothing either.
func TestClusterMinorityGrantsNothing(t *testing.T) {
	var l links
	cfg := clusterConfig(3)
	cfg.Link = l.linkHook(t)
	c := harness.StartClusterT(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	old := waitLeader(t, c)

	all := newFailover(c.URLs())
	w, err := all.acquire(ctx, "part/writer", "w", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := all.write(ctx, "part/res", w.GetToken(), "before"); err != nil {
		t.Fatal(err)
	}
	maxBefore := w.GetToken()

	l.isolate(t, old.ID())
	var others []*harness.Server
	for _, n := range c.Members() {
		if n != old {
			others = append(others, n)
		}
	}

	// The cut-off leader, asked directly: nothing it answers may be a
	// success. Each attempt is bounded (attemptTimeout); a few of them span
	// its stepping down (leader lease timeout 500ms).
	minority := nodeAPI(old.URL())
	for i := range 3 {
		actx, acancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		if l, err := acquireOnce(actx, minority, acquireReq("part/minority", "m", newID(), time.Minute, 0)); err == nil {
			t.Errorf("attempt %d: the cut-off old leader granted part/minority (token %d)", i, l.GetToken())
		}
		if st, err := minority.write(actx, "part/res", w.GetToken(), "minority"); err == nil {
			t.Errorf("attempt %d: the cut-off old leader accepted a write (version %d)", i, st.GetVersion())
		}
		acancel()
	}

	// The majority elects a leader and serves.
	newLeader := waitLeader(t, c, old)
	majority := newFailover([]string{others[0].URL(), others[1].URL()})
	g, err := majority.acquire(ctx, "part/majority", "M", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.GetToken() <= maxBefore {
		t.Errorf("the majority's grant %d is not above %d granted before the cut", g.GetToken(), maxBefore)
	}
	if _, err := majority.write(ctx, "part/res", w.GetToken(), "majority"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s cut off; %s leads the majority and granted %d", old.ID(), newLeader.ID(), g.GetToken())

	l.heal(t)
	last := waitConverged(t, c)
	if last < g.GetToken() {
		t.Errorf("converged last token %d is below the majority's grant %d", last, g.GetToken())
	}
	// Nothing of the minority's attempts was applied.
	li, err := all.get(ctx, "part/minority")
	if err != nil {
		t.Fatal(err)
	}
	if li.GetLease() != nil || li.GetLastToken() != 0 {
		t.Errorf("part/minority after healing: %v; want never granted", li)
	}
	st, err := all.read(ctx, "part/res")
	if err != nil {
		t.Fatal(err)
	}
	if string(st.GetValue()) != "majority" || st.GetVersion() != 2 {
		t.Errorf("part/res after healing = %q version %d; want \"majority\" version 2 (the minority's writes never applied)", st.GetValue(), st.GetVersion())
	}
	// Tokens continue upward, whichever node is asked.
	for _, n := range c.Members() {
		l, err := newFailover([]string{n.URL()}).acquire(ctx, "part/after-"+n.ID(), "a", time.Minute, 0)
		if err != nil {
			t.Fatalf("acquire through %s after healing: %v", n.ID(), err)
		}
		if l.GetToken() <= last {
			t.Errorf("grant through %s after healing: token %d, not above %d", n.ID(), l.GetToken(), last)
		}
		last = l.GetToken()
	}

	// An isolated follower grants nothing and accepts no write either.
	leader := waitLeader(t, c)
	var follower *harness.Server
	for _, n := range c.Members() {
		if n != leader {
			follower = n
			break
		}
	}
	l.isolate(t, follower.ID())
	fapi := nodeAPI(follower.URL())
	for i := range 2 {
		actx, acancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		if g, err := acquireOnce(actx, fapi, acquireReq("part/follower", "f", newID(), time.Minute, 0)); err == nil {
			t.Errorf("attempt %d: the cut-off follower %s granted part/follower (token %d)", i, follower.ID(), g.GetToken())
		}
		if st, err := fapi.write(actx, "part/res", w.GetToken(), "follower"); err == nil {
			t.Errorf("attempt %d: the cut-off follower accepted a write (version %d)", i, st.GetVersion())
		}
		acancel()
	}
	l.heal(t)
	waitConverged(t, c)
	if li, err := all.get(ctx, "part/follower"); err != nil || li.GetLastToken() != 0 {
		t.Errorf("part/follower after healing: %v, %v; want never granted", li, err)
	}
}
