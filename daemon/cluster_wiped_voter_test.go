package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/testkit/testutil"
)

// A voter whose data dir was lost must not come back under its old id as if
// nothing happened: raft's safety rests on a voter remembering its log and
// its vote, and an empty one would vote for a candidate that lacks
// committed entries (tokens handed out again: G1, G6) and could vote twice
// in one term. The leader finds such a join's id already a member at that
// address, and refuses it (the join says its data dir is empty) instead of
// taking it as a no-op re-add: Run fails naming the id until the member is
// removed (operations.md: remove it, then add the new one).
func TestClusterWipedVoterRejoinRefused(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	cfg1 := clusterConfig(t, "n1", ClusterConfig{Bootstrap: true})
	n1 := startRun(t, cfg1)
	n1.awaitReady(t)
	cfg2 := clusterConfig(t, "n2", ClusterConfig{Join: []string{"http://" + cfg1.Listen}})
	n2 := startRun(t, cfg2)
	n2.awaitReady(t)
	await(t, "n1 lists n1, n2", func() bool { return slices.Equal(ids(n1.members(t)), []string{"n1", "n2"}) })
	if err := n2.stop(t); err != nil {
		t.Fatalf("n2 stopped with %v", err)
	}

	cfg2.DataDir = t.TempDir() // the disk is lost; same id, same addresses
	// Long enough that only a refusal ends the join: a join that gave up
	// (nobody answered in time) also names n2, and would pass for one.
	cfg2.ReadyTimeout = clusterWait
	n2 = startRun(t, cfg2)
	select {
	case err := <-n2.done:
		n2.done <- err
		if err == nil || !strings.Contains(err.Error(), "refused to add n2") {
			t.Fatalf("wiped n2's join ended with %v, want the leader's refusal to add n2\n%s", err, n2.logs.String())
		}
	case <-time.After(2 * clusterWait):
		t.Fatalf("an empty data dir rejoined as voter n2 without a removal (join accepted):\n%s", n2.logs.String())
	}
}

// A voter whose data dir was lost is refused until it is removed; then it
// joins again as a new voter (with a majority left, the removal commits).
func TestClusterWipedVoterRemovedThenRejoins(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	n1 := startRun(t, clusterConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	n2 := startRun(t, clusterConfig(t, "n2", ClusterConfig{Join: []string{n1.url}}))
	cfg3 := clusterConfig(t, "n3", ClusterConfig{Join: []string{n1.url}})
	n3 := startRun(t, cfg3)
	n2.awaitReady(t)
	n3.awaitReady(t)
	n3.stop(t)

	// Started again without --join, the wiped n3 is reached by the leader
	// at its old address: it answers none of its RPCs (no leader said it
	// adds it), says so, and stays out.
	cfg3.DataDir = t.TempDir()
	joinURLs := cfg3.Cluster.Join
	cfg3.Cluster.Join = nil
	n3 = startRun(t, cfg3)
	await(t, "wiped n3 refuses the leader's RPCs", func() bool { return strings.Contains(n3.logs.String(), "refused raft RPCs") })
	if ms := n3.members(t); len(ms) != 0 {
		t.Fatalf("wiped n3, started without --join, is in a configuration: %v", ids(ms))
	}
	n3.stop(t)
	// With --join, it is refused.
	cfg3.Cluster.Join = joinURLs
	cfg3.DataDir = t.TempDir()
	n3 = startRun(t, cfg3)
	select {
	case err := <-n3.done:
		n3.done <- err
		if err == nil || !strings.Contains(err.Error(), "remove it first") {
			t.Fatalf("wiped n3's join: %v, want refused", err)
		}
	case <-time.After(2 * clusterWait): // past its join's ReadyTimeout (clusterWait): a join that gave up is told by its error
		t.Fatalf("wiped n3 still running after %s (its join accepted, or never asked):\n%s\nn1:\n%s", 2*clusterWait, n3.logs.String(), n1.logs.String())
	}
	if _, err := n2.client().RemoveMember(context.Background(), connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n3"})); err != nil {
		t.Fatalf("RemoveMember(n3): %v", err)
	}
	cfg3.DataDir = t.TempDir()
	n3 = startRun(t, cfg3)
	n3.awaitReady(t)
	if strings.Contains(n3.logs.String(), "nobody added it") {
		t.Errorf("n3, joined after its removal, logs the lost-voter error:\n%s", n3.logs.String())
	}
	await(t, "n1 lists n1, n2, n3", func() bool { return slices.Equal(ids(n1.members(t)), []string{"n1", "n2", "n3"}) })
}

// A voter whose data dir was lost, started again with --join under its old
// id and address: the leader, which still lists it, reaches its raft port
// by itself before its join is answered. The node answers no raft RPC
// until a leader says it adds it (node.Config.AdmitOnAdd), so nothing is
// written to its new dir; its join is refused; and a later start of the
// same dir with --peers is refused as a dir that served and lost its log.
// (The third outside attack: the leader's replication wrote a term and a
// configuration into the wiped dir, and the --peers start that followed
// passed every check — a voter that forgot its votes.)
func TestClusterWipedVoterIsNotReachedBeforeItsJoin(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	cfg1 := clusterConfig(t, "n1", ClusterConfig{Bootstrap: true})
	n1 := startRun(t, cfg1)
	n1.awaitReady(t)
	cfg3 := clusterConfig(t, "n3", ClusterConfig{Join: []string{n1.url}})
	n3 := startRun(t, cfg3)
	n3.awaitReady(t)
	n3.stop(t)

	cfg3.DataDir = t.TempDir() // wiped; same id and addresses, --join set
	logs := new(testutil.Buffer)
	cfg3.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := New(cfg3) // the raft port is open from here, as in Run
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Close()
	reached := func() bool {
		ms, err := s.Node().Members(context.Background())
		return err == nil && len(ms) > 0
	}
	// The leader reaches the wiped n3 at its old address before Join runs
	// (as a slow start lets it).
	await(t, "the leader's RPCs to the wiped n3 refused, or n3 reached", func() bool {
		return reached() || strings.Contains(logs.String(), "refused raft RPCs")
	})
	if reached() {
		t.Fatalf("the leader reached the wiped n3 before its join and replicated to it: an empty voter\n%s", logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = s.cluster.members.Join(ctx, cfg3.Cluster.Join)
	if err == nil || !strings.Contains(err.Error(), "refused to add n3") {
		t.Fatalf("Join of the wiped n3 = %v, want the leader's refusal", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg3.DataDir, node.MemberFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the wiped n3's dir records %s after a refused join (%v): raft state was written", node.MemberFile, err)
	}
	cfg3.Cluster.Join = nil
	cfg3.Cluster.Peers = []node.Peer{{ID: "n1", Addr: cfg1.Cluster.RaftAddr}, {ID: "n3", Addr: cfg3.Cluster.RaftAddr}}
	s, err = New(cfg3)
	if err == nil {
		s.Close()
		t.Fatal("the wiped n3, its join refused, started with --peers: a voter that forgot its votes")
	}
	if !errors.As(err, new(*node.LostStateError)) {
		t.Fatalf("the wiped n3's --peers start after its refused join: %v, want a *node.LostStateError", err)
	}
}

// The status call's adding flag, which lets a node that started empty
// answer raft (a leader about to add it sets it), counts only from the raft
// port: set by a client on the client port of a wiped voter, it does not
// let the leader that lists it make an empty voter of it.
func TestClusterAddingOnTheClientPortAdmitsNothing(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	n1 := startRun(t, clusterConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	cfg3 := clusterConfig(t, "n3", ClusterConfig{Join: []string{n1.url}})
	n3 := startRun(t, cfg3)
	n3.awaitReady(t)
	n3.stop(t)

	cfg3.DataDir = t.TempDir() // wiped; started again without --join
	cfg3.Cluster.Join = nil
	n3 = startRun(t, cfg3)
	const refused = "refused raft RPCs"
	await(t, "wiped n3 refuses the leader's RPCs", func() bool { return strings.Contains(n3.logs.String(), refused) })
	if _, err := n3.client().NodeStatus(context.Background(), connect.NewRequest(&fencev1.NodeStatusRequest{Adding: true})); err != nil {
		t.Fatal(err)
	}
	before := strings.Count(n3.logs.String(), refused)
	member := func() bool { return len(n3.members(t)) > 0 }
	await(t, "the leader refused again, or n3 in a configuration", func() bool {
		return member() || strings.Count(n3.logs.String(), refused) > before
	})
	if member() {
		t.Fatalf("a client's NodeStatus with adding on the client port let the leader make the wiped n3 a voter: %v", ids(n3.members(t)))
	}
}
