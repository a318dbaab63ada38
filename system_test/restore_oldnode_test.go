//go:build e2e

package system_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// An outside tester's run, with the real binary: a three-node cluster
// (--peers) is backed up and killed; fence-1 is restored into a new dir
// and started; fence-2 is started again on its OLD data dir with its old
// --peers (a node of the backed-up cluster: no leader, a term, maybe its
// old cluster id); then `fence members add fence-2 ADDR` against the
// restored node. It used to print "added fence-2 as a voter" and exit 0,
// and the restored cluster never committed again (a quorum of two with a
// voter that refuses it or whose log conflicts), not even the removal
// that would undo it. Now the add is refused (exit 4, failed_precondition
// "belongs to another cluster"), the restored node goes on serving, an
// empty node still joins with --join, and adding a member again is still
// a no-op that succeeds.
func TestRestoreOldNodeAddRefused(t *testing.T) {
	dir := t.TempDir()
	bin := fenceBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*hangGuard)
	defer cancel()
	c, err := harness.StartCluster(ctx, harness.ClusterConfig{N: 3, Bin: bin, Dir: filepath.Join(dir, "old"), ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := newFailover(c.URLs())
	held, err := f.acquire(ctx, "x", "w", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := harness.LeaderOf(ctx, c.Nodes())
	if err != nil || l == nil {
		t.Fatalf("no leader to back up from: %v", err)
	}
	file := filepath.Join(dir, "c.backup")
	backupTo(t, l.URL(), file)
	for _, n := range c.Nodes() {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}

	p1old, p2old := c.Node(0).Config(), c.Node(1).Config()
	r := restoreOK(t, nil, file, filepath.Join(dir, "r1"), "--node-id", p1old.ID, "--raft-addr", p1old.RaftAddr)
	p1 := harness.StartT(t, harness.Config{Bin: bin, ID: p1old.ID, DataDir: filepath.Join(dir, "r1"), RaftAddr: p1old.RaftAddr,
		Listen: p1old.Listen, ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	// The old node, its old dir and flags (--peers of the old cluster).
	p2old.NoWait = true
	p2 := harness.StartT(t, p2old)
	// Wait until it answers: it holds the old cluster's raft state (a
	// term) and knows no leader.
	for {
		st, err := p2.Status(ctx)
		if err == nil && st.GetTerm() > 0 && st.GetLeaderId() == "" {
			t.Logf("the old node: term %d, cluster id %q (the restored one is %q, restored from %q), applied %d", st.GetTerm(), st.GetClusterId(), r.ClusterID, r.RestoredFrom, st.GetAppliedIndex())
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the old node never answered with its old state: %v, %v\n%s", st, err, p2.LogTail(4000))
		case <-time.After(50 * time.Millisecond):
		}
	}

	out, errs, code := runFence(t, []string{"FENCE_SERVER=" + p1.URL()}, "members", "add", p2old.ID, p2old.RaftAddr)
	if code != 4 || !strings.Contains(errs, "belongs to another cluster") || !strings.Contains(errs, p2old.RaftAddr) {
		t.Fatalf("members add of the old node: exit %d, want 4 (refused: belongs to another cluster)\nstdout: %s\nstderr: %s", code, out, errs)
	}
	t.Logf("refused: %s", strings.TrimSpace(errs))
	if m, err := p1.MembersOf(ctx); err != nil || len(m.GetMembers()) != 1 {
		t.Fatalf("the restored node's members after the refusal: %v, %v", m, err)
	}
	// The restored node still commits: the restored lock is there, a new
	// grant is above it.
	a := restoreAPI(p1.URL())
	next := grantLock(t, a, "after-refusal")
	if next <= held.GetToken() || next < r.FirstToken {
		t.Fatalf("token %d after the refusal; held before %d, restore's first %d", next, held.GetToken(), r.FirstToken)
	}

	// An empty node still joins; adding it again is a no-op that succeeds.
	p3 := harness.StartT(t, harness.Config{Bin: bin, ID: "fence-9", DataDir: filepath.Join(dir, "fresh"), RaftAddr: "auto",
		Args: []string{"--join", p1.URL()}, ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	if m, err := p1.MembersOf(ctx); err != nil || len(m.GetMembers()) != 2 {
		t.Fatalf("members after the empty node joined: %v, %v", m, err)
	}
	out, errs, code = runFence(t, []string{"FENCE_SERVER=" + p1.URL()}, "members", "add", p3.ID(), p3.RaftAddr())
	if code != 0 {
		t.Fatalf("members add of a member again: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if next2 := grantLock(t, a, "after-join"); next2 <= next {
		t.Fatalf("token %d after %d", next2, next)
	}
}
