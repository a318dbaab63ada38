package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/node"
)

// A member whose disk was lost is started again with --bootstrap under its
// old id and address while its old peers run. It makes a new cluster and
// is not taken back by the running leader, which still lists it as a
// voter: it chose its cluster id before raft started (node.ClusterIDFile),
// so its raft port refuses that leader's connections from the first one.
// (The third outside attack: it knew no cluster id until its own first
// leader term recorded one, and the old leader's heartbeat came first —
// it became an empty voter of the old cluster, one that forgot its log and
// its votes.)
//
// Its election timeout is set past the old leader's retry backoff, so that
// without the id chosen up front the old leader reaches it while it waits
// to elect itself: the race the attack won, made certain.
func TestClusterWipedMemberRebootstrappedWhilePeersRunIsRefused(t *testing.T) {
	t.Parallel() // a cluster of its own, mostly waiting on elections and joins
	n1 := startRun(t, clusterConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	n2 := startRun(t, clusterConfig(t, "n2", ClusterConfig{Join: []string{n1.url}}))
	cfg3 := clusterConfig(t, "n3", ClusterConfig{Join: []string{n1.url}})
	n3 := startRun(t, cfg3)
	n2.awaitReady(t)
	n3.awaitReady(t)
	ctx := context.Background()
	var last uint64
	for i := range 3 {
		g, err := n1.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: fmt.Sprintf("job%d", i), Owner: "o", Ttl: durationpb.New(10 * time.Minute)}))
		if err != nil {
			t.Fatal(err)
		}
		last = g.Msg.GetLease().GetToken()
	}
	oldID := n1.status(t).GetClusterId()
	if err := n3.stop(t); err != nil {
		t.Fatalf("n3 stopped with %v", err)
	}

	// n3's disk is lost; it is started with --bootstrap, its peers running.
	cfg3.DataDir = t.TempDir()
	cfg3.Cluster.Join = nil
	cfg3.Cluster.Bootstrap = true
	// It stays a follower waiting for a leader well past the old leader's
	// retry backoff (raft's, about 10s at most): only the refusal keeps
	// it out of the old cluster.
	cfg3.Cluster.HeartbeatTimeout = 3 * clusterWait
	cfg3.Cluster.ElectionTimeout = 3 * clusterWait
	n3 = startRun(t, cfg3)
	newID := strings.TrimSpace(readFile(t, cfg3.DataDir, node.ClusterIDFile))
	if newID == "" || newID == oldID {
		t.Fatalf("the re-bootstrapped n3 recorded cluster id %q before it started (old %q)", newID, oldID)
	}

	takenBack := func() bool {
		st := n3.status(t)
		return st.GetLastToken() != 0 || st.GetLeaderId() == "n1" || st.GetLeaderId() == "n2" || st.GetClusterId() == oldID
	}
	await(t, "the old leader's connection to the re-bootstrapped n3 refused, or n3 taken back", func() bool {
		return takenBack() || strings.Contains(n3.logs.String(), "a node of another cluster was refused")
	})
	if takenBack() {
		st := n3.status(t)
		t.Fatalf("the re-bootstrapped n3 was taken back by the old cluster as an empty voter: leader %s, cluster %s, last token %d (the old cluster's is %d)",
			st.GetLeaderId(), st.GetClusterId(), st.GetLastToken(), last)
	}
	if ms := ids(n3.members(t)); !slices.Equal(ms, []string{"n3"}) {
		t.Fatalf("the re-bootstrapped n3's members: %v, want its own cluster of one", ms)
	}
	// The old cluster goes on from its own last token.
	g, err := n1.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "after", Owner: "o", Ttl: durationpb.New(time.Minute)}))
	if err != nil {
		t.Fatal(err)
	}
	if tok := g.Msg.GetLease().GetToken(); tok != last+1 {
		t.Fatalf("the old cluster's next token %d, want %d", tok, last+1)
	}
	if id := n1.status(t).GetClusterId(); id != oldID {
		t.Fatalf("n1's cluster id %q, want the old %q", id, oldID)
	}
}

// readFile returns dir/name's content ("" if it cannot be read).
func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}
