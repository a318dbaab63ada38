package node

import (
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/raftstore"
)

// A data dir remembers the node id it was first started with; a start with
// another id is refused, naming both (it ran as a stranger to its own log).
func TestNodeIDMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, NodeID: "a", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, n, acquire("l", time.Hour))
	n.Close()
	_, err = Open(Config{DataDir: dir, NodeID: "b", Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), `belongs to node "a"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("open with another node id = %v, want a refusal naming both ids", err)
	}
	n, err = Open(Config{DataDir: dir, NodeID: "a", Logger: quietLogger()})
	if err != nil {
		t.Fatalf("reopen with its own id: %v", err)
	}
	defer n.Close()
	if got := mustApply(t, n, acquire("m", time.Hour)).Lease.Token; got != 2 {
		t.Fatalf("token after the refused start = %d, want 2", got)
	}
}

// A cluster member restarted at another raft address than the cluster
// records for it is refused (raft would go on sending to the old one):
// moving a node is remove and add. At its own address it rejoins.
func TestClusterAddressChangeRefused(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	f := tc.others(lead)[0]
	tc.kill(f)
	other, err := raftstore.Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	moved := f.cfg
	moved.Mux, moved.Peers = other, nil // a restart ignores Peers; its address is the new mux's
	if _, err := Open(moved); err == nil || !strings.Contains(err.Error(), "to move a node") || !strings.Contains(err.Error(), f.mux.Addr()) {
		t.Fatalf("restart at %s = %v, want a refusal naming the recorded address %s", other.Addr(), err, f.mux.Addr())
	}
	tc.open(f)
	tc.caughtUp(tc.members, tc.leader())
}
