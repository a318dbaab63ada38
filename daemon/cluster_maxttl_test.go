package daemon

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/state"
)

// A follower started with a lower --max-ttl than the rules recorded in the
// log checks a request's ttl against the log's rule, as the leader's state
// machine will: an acquire above its own flag but within the log's rule is
// forwarded and granted, and the retry of that request_id through the same
// follower returns the same lease (a refusal there would tell a client that
// holds the lease that it does not: G5). A ttl above the log's rule is still
// refused before anything is proposed. (Found by the outside review: the
// follower judged by its own flag.) The same holds for lock_delay and
// --max-lock-delay.
func TestClusterFollowerChecksTTLAndLockDelayAgainstTheLogsRule(t *testing.T) {
	ids := []string{"n1", "n2", "n3"}
	peers, addrs := staticPeers(t, ids)
	nodes := map[string]*runNode{}
	for _, id := range ids {
		cfg := clusterConfig(t, id, ClusterConfig{RaftAddr: addrs[id], Peers: peers})
		if id == "n3" {
			cfg.Rules = state.DefaultConfig()
			cfg.Rules.MaxTTL = 10 * time.Second       // the odd one out; the others keep 24h
			cfg.Rules.MaxLockDelay = 10 * time.Second // and 1m
		}
		nodes[id] = startRun(t, cfg)
	}
	// Leadership must not sit on n3: its flags would record 10s for all.
	var lead *runNode
	await(t, "a leader other than n3 in office, n3 ready", func() bool {
		lead = nil
		for _, id := range ids[:2] {
			if st := nodes[id].status(t); st.GetRole() == "leader" && st.GetReady() {
				lead = nodes[id]
			}
		}
		if lead == nil {
			if st := nodes["n3"].status(t); st.GetRole() == "leader" && st.GetReady() {
				nodes["n3"].client().TransferLeadership(context.Background(), connect.NewRequest(&fencev1.TransferLeadershipRequest{Id: "n1"}))
			}
			return false
		}
		return nodes["n3"].status(t).GetReady()
	})
	// n3 has applied the leader's rules (24h): a grant through the leader
	// and n3 caught up with it.
	ctx := context.Background()
	if _, err := lead.locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "warm", Owner: "t", Ttl: durationpb.New(time.Second)})); err != nil {
		t.Fatal(err)
	}
	leadApplied := lead.status(t).GetAppliedIndex()
	await(t, "n3 applied the leader's entries", func() bool { return nodes["n3"].status(t).GetAppliedIndex() >= leadApplied })

	req := &fencev1.AcquireRequest{Name: "long", Owner: "t", Ttl: durationpb.New(20 * time.Second), RequestId: "long-1"}
	first, err := nodes["n3"].locks().Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("acquire ttl 20s through n3 (its flag 10s, the log's rule 24h): %v", err)
	}
	again, err := nodes["n3"].locks().Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("retry of request_id long-1 through n3: %v", err)
	}
	if again.Msg.GetLease().GetToken() != first.Msg.GetLease().GetToken() || !again.Msg.GetReplayed() {
		t.Fatalf("retry: token %d replayed %v, want the same lease (token %d) replayed",
			again.Msg.GetLease().GetToken(), again.Msg.GetReplayed(), first.Msg.GetLease().GetToken())
	}
	_, err = nodes["n3"].locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "too-long", Owner: "t", Ttl: durationpb.New(25 * time.Hour)}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("ttl 25h through n3: %v, want invalid_argument (the log's rule is 24h)", err)
	}
	// The same for lock_delay: n3's flag says 10s, the log's rule 1m.
	if _, err := nodes["n3"].locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "delayed", Owner: "t",
		Ttl: durationpb.New(time.Second), LockDelay: durationpb.New(30 * time.Second)})); err != nil {
		t.Fatalf("lock_delay 30s through n3 (its flag 10s, the log's rule 1m): %v", err)
	}
	_, err = nodes["n3"].locks().Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "delayed-long", Owner: "t",
		Ttl: durationpb.New(time.Second), LockDelay: durationpb.New(2 * time.Minute)}))
	checkInvalid(t, err, "lock_delay")
}
