package backup

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

func memberConfig(dir, id string, mux *raftstore.Mux) node.Config {
	return node.Config{DataDir: dir, NodeID: id, Mux: mux, Logger: quiet, HeartbeatTimeout: 300 * time.Millisecond,
		ElectionTimeout: 600 * time.Millisecond, LeaderLeaseTimeout: 300 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		OnFatal: func(error) {}}
}

func openMember(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", cfg.NodeID, err)
	}
	return n
}

// waitUntil polls cond (a hang guard, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An old member of the backed-up cluster, started against the restored
// one with its old data dir, id and address (the restored cluster has it
// in its configuration), never leads it: the restored log starts at
// RestoreTerm, far above the old log's terms, so the old node's log is
// never as up to date as a restored member's and no one votes for it —
// not even when leadership is transferred to it — and the tokens go on
// above every one issued before. (With the backup's own term, its log
// matched the restored one at the backup's index: it was taken as a
// follower with its old state and, asked to lead, led and granted tokens
// from its old counter.) It does not receive the restored state either:
// its log is kept out (raft finds no common entry); it must be wiped, as
// operations.md says.
func TestOldMemberCannotLeadTheRestoredCluster(t *testing.T) {
	var muxes [3]*raftstore.Mux
	var peers []node.Peer
	for i := range muxes {
		m, err := raftstore.Listen("127.0.0.1:0", "")
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		muxes[i] = m
		peers = append(peers, node.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: m.Addr()})
	}
	root := t.TempDir()
	oldDir := func(i int) string { return filepath.Join(root, fmt.Sprintf("old-n%d", i+1)) }
	var old [3]*node.Node
	for i := range old {
		cfg := memberConfig(oldDir(i), peers[i].ID, muxes[i])
		cfg.Peers = peers
		old[i] = openMember(t, cfg)
	}
	leader := func(ns ...*node.Node) *node.Node {
		var l *node.Node
		waitUntil(t, "a leader in office", func() bool {
			for _, n := range ns {
				if n != nil && n.IsLeader() && n.Ready() {
					l = n
					return true
				}
			}
			return false
		})
		return l
	}
	l := leader(old[:]...)
	for i := range 5 {
		grant(t, l, "before-"+strconv.Itoa(i))
	}
	file := filepath.Join(root, "b.fence")
	takeBackup(t, l, file)
	var T uint64
	for i := range 20 {
		T = uint64(grant(t, l, "after-"+strconv.Itoa(i)))
	}
	waitUntil(t, "the old members caught up", func() bool {
		return uint64(old[0].LastToken()) == T && uint64(old[1].LastToken()) == T && uint64(old[2].LastToken()) == T
	})
	for _, n := range old {
		n.Close()
	}

	// The restored cluster: n1 restored at its old address, n2 and n3
	// joined empty at theirs, then n3 stopped.
	rep, err := Restore(context.Background(), file, RestoreOptions{DataDir: filepath.Join(root, "new-n1"), NodeID: "n1", RaftAddr: muxes[0].Addr(), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	n1 := openMember(t, memberConfig(filepath.Join(root, "new-n1"), "n1", muxes[0]))
	defer n1.Close()
	leader(n1)
	n2 := openMember(t, memberConfig(filepath.Join(root, "new-n2"), "n2", muxes[1]))
	defer n2.Close()
	n3 := openMember(t, memberConfig(filepath.Join(root, "new-n3"), "n3", muxes[2]))
	for i, n := range []*node.Node{n2, n3} {
		if err := n1.AddVoter(context.Background(), n.ID(), muxes[i+1].Addr()); err != nil {
			t.Fatal(err)
		}
	}
	first := grant(t, n1, "restored-1")
	if first != rep.First || uint64(first) <= T {
		t.Fatalf("first token after the restore %d, want %d > %d", first, rep.First, T)
	}
	waitUntil(t, "the new n3 caught up", func() bool { return n3.LastToken() == first })
	n3.Close()

	// The old n3 comes back instead: old dir, same id and address.
	back := openMember(t, memberConfig(oldDir(2), "n3", muxes[2]))
	defer back.Close()
	var last uint64
	for i := range 3 {
		last = uint64(grant(t, n1, "restored-more-"+strconv.Itoa(i)))
	}
	// Asked to lead (fence members transfer n3), the old node must not:
	// its log's last term is below every restored member's, so no one
	// votes for it; whoever leads then issues tokens above every one
	// issued before.
	n1.TransferLeadership(context.Background(), "n3") // refused or not: what counts is who leads after
	var tok uint64
	waitUntil(t, "a grant after the transfer", func() bool {
		for _, n := range []*node.Node{n1, n2, back} {
			if !n.IsLeader() {
				continue
			}
			if n == back {
				t.Fatalf("the old n3 leads the restored cluster (its last token %d)", back.LastToken())
			}
			r, err := n.Apply(context.Background(), state.Command{Op: state.OpAcquire, Name: "after-transfer", Owner: "t", TTL: time.Hour})
			if err == nil && r.Err == nil {
				tok = uint64(r.Lease.Token)
				return true
			}
		}
		return false
	})
	if tok <= last || tok <= T {
		t.Fatalf("token %d after the transfer, want above %d and %d", tok, last, T)
	}
	if back.IsLeader() {
		t.Fatal("the old n3 leads")
	}
}
