package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// addedJoiner starts a cluster of two voters and a third node added as a
// voter (join mode), caught up; the joiner is then killed.
func addedJoiner(t *testing.T, tweak func(*Config)) (*testCluster, *member) {
	t.Helper()
	tc := startCluster(t, clusterOpts{n: 2, joiners: 1, tweak: tweak})
	lead := tc.leaderAmong(tc.members[:2])
	joiner := tc.members[2]
	grant(t, lead.node, "before")
	if err := lead.node.AddVoter(context.Background(), joiner.id, joiner.mux.Addr()); err != nil {
		t.Fatal(err)
	}
	tc.caughtUp([]*member{joiner}, lead)
	tc.kill(joiner)
	return tc, joiner
}

// startModes are the three ways a cluster member's dir can be started:
// join (neither Bootstrap nor Peers), Peers, Bootstrap.
func startModes(tc *testCluster, mb *member) map[string]Config {
	var peers []Peer
	for _, m := range tc.members {
		peers = append(peers, Peer{ID: m.id, Addr: m.mux.Addr()})
	}
	join, static, boot := mb.cfg, mb.cfg, mb.cfg
	join.Peers, join.Bootstrap = nil, false
	static.Peers, static.Bootstrap = peers, false
	boot.Peers, boot.Bootstrap = nil, true
	return map[string]Config{"--join": join, "--peers": static, "--bootstrap": boot}
}

// A cluster member whose wal/ was lost (its raft log and its stable store:
// the term and the votes it cast) is refused at Open in every start mode
// with a *LostMemberLogError: it has been a member (MEMBER), and holds no
// term. (The third outside attack: started once with --join, it was
// replicated to by the leader that still listed it as a voter, which wrote
// a term; a later --peers start then passed every check, a voter that
// forgot its votes.)
func TestMemberThatLostItsWALIsRefusedInEveryMode(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, joiner := addedJoiner(t, nil)
	if _, err := os.Stat(filepath.Join(joiner.dir, MemberFile)); err != nil {
		t.Fatalf("an added member's dir holds no %s: %v", MemberFile, err)
	}
	if err := os.RemoveAll(filepath.Join(joiner.dir, "wal")); err != nil {
		t.Fatal(err)
	}
	modes := startModes(tc, joiner)
	// --join first: the start the attack began with.
	for _, mode := range []string{"--join", "--peers", "--bootstrap"} {
		n, err := Open(modes[mode])
		if err == nil {
			n2 := forgetfulVoter(t, tc, joiner, n, modes["--peers"])
			n2.Close()
			t.Fatalf("Open with %s of a member that lost its wal/ succeeded: a voter that forgot its votes", mode)
		}
		var lost *LostMemberLogError
		if !errors.As(err, &lost) || lost.Dir != joiner.dir || lost.NodeID != joiner.id {
			t.Fatalf("Open with %s of a member that lost its wal/: %v, want a *LostMemberLogError naming %s and %s", mode, err, joiner.dir, joiner.id)
		}
	}
}

// forgetfulVoter shows, for a failure message, where a member that lost
// its wal/ and was started anyway leads: the leader that lists it writes a
// term into its new log, and a --peers start is then accepted.
func forgetfulVoter(t *testing.T, tc *testCluster, mb *member, n *Node, peers Config) *Node {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	for n.raft.CurrentTerm() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the leader's replication, not a timing bound: a hang guard
	}
	n.Close()
	n2, err := Open(peers)
	if err != nil {
		t.Logf("the later --peers start was refused: %v", err)
		return n
	}
	t.Logf("the later --peers start was accepted: term %d, a voter that forgot its votes", n2.raft.CurrentTerm())
	return n2
}

// MEMBER lost while the log is intact: Open writes it again (the dir has
// raft state: it has been a member), so a later loss of wal/ is still
// refused. A dir from a version before the file is the same case.
func TestMemberFileLostWithLogIntactIsWrittenAgain(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc, joiner := addedJoiner(t, nil)
	if err := os.Remove(filepath.Join(joiner.dir, MemberFile)); err != nil {
		t.Fatal(err)
	}
	tc.open(joiner)
	lead := tc.leaderAmong(tc.live())
	grant(t, lead.node, "after")
	tc.caughtUp([]*member{joiner}, lead)
	if _, err := os.Stat(filepath.Join(joiner.dir, MemberFile)); err != nil {
		t.Fatalf("the restart of a member with its log did not record %s again: %v", MemberFile, err)
	}
	tc.kill(joiner)
	if err := os.RemoveAll(filepath.Join(joiner.dir, "wal")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(startModes(tc, joiner)["--peers"]); !errors.As(err, new(*LostMemberLogError)) {
		t.Fatalf("Open of the member after it lost wal/: %v, want a *LostMemberLogError", err)
	}
}

// A node waiting to be added records MEMBER before its first stable-store
// write of a term above 0 (raft.NewRaft saves the 0 it read back) — the term of the leader that added it, which raft saves before it
// answers the leader — so no crash can leave a dir that answered a leader
// without the file. (A crash between the file and the term leaves a dir
// that Open refuses though it answered nobody: the safe side.)
func TestJoinerRecordsMemberBeforeItsFirstTerm(t *testing.T) {
	t.Parallel() // a cluster of its own
	var writes, before atomic.Int64
	tc := startCluster(t, clusterOpts{n: 2, joiners: 1, tweak: func(c *Config) {
		if c.NodeID != "n3" {
			return
		}
		dir := c.DataDir
		c.wrapStable = func(s raft.StableStore) raft.StableStore {
			return &observedStable{StableStore: s, write: func(v uint64) {
				if v != 0 && writes.Add(1) == 1 {
					if _, err := os.Stat(filepath.Join(dir, MemberFile)); err == nil {
						before.Store(1)
					}
				}
			}}
		}
	}})
	joiner := tc.members[2]
	if _, err := os.Stat(filepath.Join(joiner.dir, MemberFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a node waiting to be added, never reached, records %s (%v): it answered nobody", MemberFile, err)
	}
	lead := tc.leaderAmong(tc.members[:2])
	if err := lead.node.AddVoter(context.Background(), joiner.id, joiner.mux.Addr()); err != nil {
		t.Fatal(err)
	}
	tc.caughtUp([]*member{joiner}, lead)
	if writes.Load() == 0 {
		t.Fatal("the added node wrote nothing to its stable store")
	}
	if before.Load() != 1 {
		t.Fatalf("the added node's first stable-store write came before %s was recorded", MemberFile)
	}
}

// observedStable calls write before each write to the stable store (with
// the value of a SetUint64, 1 for a Set).
type observedStable struct {
	raft.StableStore
	write func(v uint64)
}

func (s *observedStable) Set(k, v []byte) error {
	s.write(1)
	return s.StableStore.Set(k, v)
}

func (s *observedStable) SetUint64(k []byte, v uint64) error {
	s.write(v)
	return s.StableStore.SetUint64(k, v)
}
