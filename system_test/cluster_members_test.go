//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// TestClusterRemovedNodeCannotGrant: a 3-node cluster formed with
// --bootstrap and --join. fence-1 (the bootstrap node) is removed, killed
// and restarted with its same flags, --bootstrap included: its data dir
// has raft state, so the flag is ignored and it does not make itself a
// cluster of one. Asked directly, it grants nothing and accepts no write
// that the cluster does not hold; the two remaining voters serve.
func TestClusterRemovedNodeCannotGrant(t *testing.T) {
	cfg := clusterConfig(3)
	cfg.Join = true
	c := harness.StartClusterT(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	removed := c.Node(0)
	if l := waitLeader(t, c); l == removed {
		if _, err := c.Transfer(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	all := newFailover(c.URLs())
	w, err := all.acquire(ctx, "rm/writer", "w", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}

	if err := c.RemoveMember(ctx, removed); err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, c)
	ms, err := leader.MembersOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms.GetMembers() {
		ids = append(ids, m.GetId())
	}
	if slices.Contains(ids, removed.ID()) || len(ids) != 2 {
		t.Fatalf("members after removing %s: %v", removed.ID(), ids)
	}

	if err := removed.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := removed.Launch(ctx); err != nil { // its first flags: --bootstrap
		t.Fatal(err)
	}
	// Over several election timeouts, the removed node must not grant
	// or write on its own. (A call it forwarded to the real leader would
	// be the cluster's grant: that is checked against the leader's state.)
	rm := nodeAPI(removed.URL())
	granted := map[string]uint64{} // lock -> token, as the removed node answered
	lastWrite := ""                // the last value it said it wrote
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		name := fmt.Sprintf("rm/try-%d", i)
		if g, err := acquireOnce(actx, rm, acquireReq(name, "r", newID(), time.Minute, 0)); err == nil {
			granted[name] = g.GetToken()
		}
		v := fmt.Sprint("removed-", i)
		if _, err := rm.write(actx, "rm/res", w.GetToken(), v); err == nil {
			lastWrite = v
		}
		acancel()
		if st, err := removed.Status(ctx); err == nil && st.GetRole() == "leader" {
			t.Errorf("the removed node says it leads: %v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The remaining two serve, and hold every grant and write the removed
	// node reported: none was its own.
	rest := newFailover([]string{c.Node(1).URL(), c.Node(2).URL()})
	for name, tok := range granted {
		li, err := rest.get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if li.GetLastToken() != tok {
			t.Errorf("the removed node granted %s token %d; the cluster has %v", name, tok, li)
		}
	}
	st, err := rest.read(ctx, "rm/res")
	switch {
	case err != nil && !isRefusal(err):
		t.Fatal(err)
	case lastWrite != "" && (err != nil || string(st.GetValue()) != lastWrite):
		t.Errorf("the removed node accepted a write of %q; the cluster has %v (%v)", lastWrite, st, err)
	case lastWrite == "" && err == nil && st.GetVersion() != 0:
		t.Errorf("rm/res = %v, though no write through the removed node was accepted", st)
	}
	g, err := rest.acquire(ctx, "rm/after", "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %s; %d grants through it afterwards (forwarded), last write %q; the remaining voters granted %d", removed.ID(), len(granted), lastWrite, g.GetToken())
	if st, err := removed.Status(ctx); err == nil && st.GetLastToken() >= g.GetToken() {
		t.Errorf("the removed node has applied token %d, granted after its removal", st.GetLastToken())
	}
}

// TestClusterAddedNodeReceivesState: a node added to a running 3-node
// cluster (--join, raft's AddVoter) receives the whole state: after it
// catches up, leadership is moved onto it and every lease and resource
// written before it joined is read back through it, as its own state.
func TestClusterAddedNodeReceivesState(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	waitLeader(t, c)
	all := newFailover(c.URLs())
	held := map[string]uint64{}
	values := map[string]string{}
	var maxToken uint64
	for i := range 20 {
		name := fmt.Sprintf("add/lock-%d", i)
		l, err := all.acquire(ctx, name, "o", 2*time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		held[name] = l.GetToken()
		maxToken = max(maxToken, l.GetToken())
		res := fmt.Sprintf("add/res-%d", i)
		values[res] = fmt.Sprint("value-", i)
		if _, err := all.write(ctx, res, l.GetToken(), values[res]); err != nil {
			t.Fatal(err)
		}
	}

	added, err := c.AddNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, c)
	ms, err := leader.MembersOf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.GetMembers()) != 4 {
		t.Fatalf("members after adding %s: %v", added.ID(), ms.GetMembers())
	}
	waitConverged(t, c)
	if _, err := c.Transfer(ctx, added); err != nil {
		t.Fatal(err)
	}
	// Reads go to the leader: the added node answers from its own state.
	only := newFailover([]string{added.URL()})
	for name, tok := range held {
		li, err := only.get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if li.GetLease().GetToken() != tok {
			t.Errorf("%s through the added leader: %v, want held with token %d", name, li, tok)
		}
	}
	for res, v := range values {
		st, err := only.read(ctx, res)
		if err != nil {
			t.Fatal(err)
		}
		if string(st.GetValue()) != v || st.GetVersion() != 1 {
			t.Errorf("%s through the added leader = %q version %d, want %q version 1", res, st.GetValue(), st.GetVersion(), v)
		}
	}
	g, err := only.acquire(ctx, "add/next", "n", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.GetToken() <= maxToken {
		t.Errorf("the added leader granted token %d, not above %d", g.GetToken(), maxToken)
	}
}
