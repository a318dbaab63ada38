package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/node"
)

// The bootstrap node of a 3-node cluster loses its data dir while the
// whole cluster is down and is started again with its usual command line
// (--bootstrap): it makes a new cluster of its own and grants tokens from
// 1 in it. When its old peers come back, they know their cluster id from
// the start (node.ClusterIDFile, before they apply anything) and refuse
// its raft connections: it does not join them, they do not join it, and
// the old cluster goes on from its own last token. (The outside attack:
// the restarted members knew no cluster id until a leader committed, took
// the re-bootstrapped node as a follower, and its replica diverged while
// the cluster granted tokens it had granted too.)
//
// The same when the old members' dirs hold no CLUSTER_ID (written by a
// version before the file, or the file lost): they read their cluster id
// from their own log as they open (second outside attack).
func TestClusterRebootstrappedMemberIsRefused(t *testing.T) {
	t.Run("CLUSTER_ID recorded", func(t *testing.T) { rebootstrappedMember(t, false) })
	t.Run("CLUSTER_ID gone", func(t *testing.T) { rebootstrappedMember(t, true) })
}

func rebootstrappedMember(t *testing.T, removeFile bool) {
	cfg1 := clusterConfig(t, "n1", ClusterConfig{Bootstrap: true})
	n1 := startRun(t, cfg1)
	n1.awaitReady(t)
	var cfgs []Config
	var others []*runNode
	for _, id := range []string{"n2", "n3"} {
		cfg := clusterConfig(t, id, ClusterConfig{Join: []string{n1.url}})
		cfgs = append(cfgs, cfg)
		n := startRun(t, cfg)
		n.awaitReady(t)
		others = append(others, n)
	}
	ctx := context.Background()
	acquire := func(n *runNode, name string) uint64 {
		t.Helper()
		g, err := n.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "o", Ttl: durationpb.New(10 * time.Minute)}))
		if err != nil {
			t.Fatalf("acquire %s through %s: %v", name, n.id, err)
		}
		return g.Msg.GetLease().GetToken()
	}
	var last uint64
	for i := range 5 {
		last = acquire(n1, fmt.Sprintf("job%d", i))
	}
	oldID := n1.status(t).GetClusterId()
	for _, n := range others {
		await(t, n.id+" applied the grants", func() bool { return n.status(t).GetLastToken() == last })
		for _, f := range []string{node.ClusterIDFile} {
			await(t, n.id+" recorded its cluster id", func() bool { return fileHas(n.cfg.DataDir, f, oldID) })
		}
	}
	for _, n := range append([]*runNode{n1}, others...) {
		if err := n.stop(t); err != nil {
			t.Fatalf("%s stopped with %v", n.id, err)
		}
	}

	// n1's disk is lost; it starts again as it always did.
	cfg1.DataDir = t.TempDir()
	n1 = startRun(t, cfg1)
	n1.awaitReady(t)
	newID := n1.status(t).GetClusterId()
	if newID == "" || newID == oldID {
		t.Fatalf("the re-bootstrapped node's cluster id %q (old %q)", newID, oldID)
	}
	for i := range 12 {
		acquire(n1, fmt.Sprintf("z%d", i))
	}

	if removeFile {
		for _, cfg := range cfgs {
			if err := os.Remove(filepath.Join(cfg.DataDir, node.ClusterIDFile)); err != nil {
				t.Fatal(err)
			}
		}
	}
	others = others[:0]
	for _, cfg := range cfgs {
		others = append(others, startRun(t, cfg))
	}
	// The old members elect between them; the new node's raft port and
	// theirs refuse each other's connections.
	await(t, "a connection between the two clusters refused", func() bool {
		for _, n := range append([]*runNode{n1}, others...) {
			if strings.Contains(n.logs.String(), "a node of another cluster was refused") {
				return true
			}
		}
		return false
	})
	var lead *runNode
	await(t, "n2 or n3 leads the old cluster", func() bool {
		for _, n := range others {
			if st := n.status(t); st.GetRole() == "leader" && st.GetReady() {
				lead = n
				return true
			}
		}
		return false
	})
	if tok := acquire(lead, "after"); tok != last+1 {
		t.Fatalf("the old cluster's next token is %d, want %d (its last was %d)", tok, last+1, last)
	}
	for _, n := range others {
		// A follower's state knows its id once it has applied (the grant
		// above committed with the leader and one follower: the other may
		// lag).
		await(t, n.id+" applied the grant", func() bool { return n.status(t).GetLastToken() == last+1 })
		if st := n.status(t); st.GetClusterId() != oldID {
			t.Fatalf("%s: cluster id %q, want the old %q", n.id, st.GetClusterId(), oldID)
		}
	}
	st := n1.status(t)
	if st.GetRole() != "leader" || st.GetClusterId() != newID || st.GetLastToken() != 12 {
		t.Fatalf("the re-bootstrapped node: role %s, cluster %s, last token %d; want the leader of its own cluster %s at token 12",
			st.GetRole(), st.GetClusterId(), st.GetLastToken(), newID)
	}
}

// fileHas reports whether dir/name holds want (trimmed).
func fileHas(dir, name, want string) bool {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return err == nil && strings.TrimSpace(string(b)) == want
}
