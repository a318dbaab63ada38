package daemon

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// A member removed from a cluster whose raft ports speak mutual TLS keeps
// its certificate, and may keep a connection to the leader's raft port
// open. Through the peer port a call is a node's, trusted as an admin's:
// so the removed member's calls are refused from its removal on, on the
// connection it held (the server asks at every call whether the node is a
// member; the port closes its connections) and on a new one (the
// handshake). An outside test kept such a connection, accepted as a node
// started, and streamed backups through it. (Planted: the per-call check
// and the sweep both off, the held connection is served.)
func TestPeerTLSRemovedMemberLosesThePeerPort(t *testing.T) {
	t.Parallel()
	p := newPeerPKI(t)
	n1 := startRun(t, p.peerConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	n2 := startRun(t, p.peerConfig(t, "n2", ClusterConfig{Join: []string{n1.url}}))
	n2.awaitReady(t)
	n3 := startRun(t, p.peerConfig(t, "n3", ClusterConfig{Join: []string{n1.url}}))
	n3.awaitReady(t)
	var lead *runNode
	await(t, "a leader in office", func() bool {
		for _, n := range []*runNode{n1, n2, n3} {
			if st := n.status(t); st.GetRole() == "leader" && st.GetReady() {
				lead = n
				return true
			}
		}
		return false
	})
	if lead == n3 {
		if _, err := n3.client().TransferLeadership(context.Background(), connect.NewRequest(&fencev1.TransferLeadershipRequest{})); err != nil {
			t.Fatal(err)
		}
		await(t, "the leadership moved off n3", func() bool {
			for _, n := range []*runNode{n1, n2} {
				if st := n.status(t); st.GetRole() == "leader" && st.GetReady() {
					lead = n
					return true
				}
			}
			return false
		})
	}
	// n3's certificate, as n3 would hold a connection to the leader's
	// raft port: one client, its connection kept alive.
	held := clusterapi.PeerHTTPClient(tlsDial(tlsCert(t, p.ca, "n3"), p.ca.Pool()))
	url := "http://" + lead.cfg.Cluster.RaftAddr
	backup := func(c connect.HTTPClient) error { return peerBackup(c, url) }
	if err := backup(held); err != nil {
		t.Fatalf("a backup asked by member n3 over the leader's raft port: %v", err)
	}
	if _, err := lead.client().RemoveMember(context.Background(), connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n3"})); err != nil {
		t.Fatal(err)
	}
	n3.stop(t)
	if err := backup(held); err == nil {
		t.Fatal("a backup asked by removed n3 on its held connection: served, want refused")
	}
	fresh := clusterapi.PeerHTTPClient(tlsDial(tlsCert(t, p.ca, "n3"), p.ca.Pool()))
	if err := backup(fresh); err == nil {
		t.Fatal("a backup asked by removed n3 on a new connection: served, want refused")
	}
	// The cluster goes on: the other member still reaches the leader.
	if err := backup(clusterapi.PeerHTTPClient(tlsDial(tlsCert(t, p.ca, map[*runNode]string{n1: "n2", n2: "n1"}[lead]), p.ca.Pool()))); err != nil {
		t.Fatalf("a backup asked by a member after n3's removal: %v", err)
	}
}

// A member down while another was removed still lists it when it
// restarts, until it has caught up: an outside test was served as the
// removed member through the restarted node's raft port for seconds (an
// admin there: writes, backups, a forwarded AddMember that re-added it).
// From the restart until it has caught up, and after, every call of the
// removed member through the restarted node's raft port is refused. The
// node restarts while the other members are down, so that its first call
// is surely before it has caught up.
func TestPeerTLSRemovedMemberRefusedByARestartedMember(t *testing.T) {
	t.Parallel()
	p := newPeerPKI(t)
	n1 := startRun(t, p.peerConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	nodes := []*runNode{n1}
	for _, id := range []string{"n2", "n3", "n4"} {
		n := startRun(t, p.peerConfig(t, id, ClusterConfig{Join: []string{n1.url}}))
		n.awaitReady(t)
		nodes = append(nodes, n)
	}
	// The member restarted (n3) and the member removed (n4) are two
	// followers: n1 bootstrapped and led first, but on a loaded machine a
	// missed heartbeat may have moved the lead since.
	lead := awaitLeader(t, nodes)
	var followers []*runNode
	for _, n := range nodes {
		if n != lead {
			followers = append(followers, n)
		}
	}
	n3, n4 := followers[1], followers[2]
	cfg3 := n3.cfg
	n3.stop(t)
	removeMember(t, []*runNode{lead, followers[0]}, n4.id)
	n4.stop(t)
	// n3 restarts while the other two are down: with no leader it cannot
	// catch up, so the removed member's first call surely finds it behind
	// (with them up it could catch up before that call, at whatever speed
	// the machine has). Then they come back, and n3 catches up.
	others := []*runNode{lead, followers[0]}
	for _, n := range others {
		n.stop(t)
	}
	n3 = startRun(t, cfg3)
	removed := clusterapi.PeerHTTPClient(tlsDial(tlsCert(t, p.ca, n4.id), p.ca.Pool()))
	url := "http://" + cfg3.Cluster.RaftAddr
	try := func() error { return peerBackup(removed, url) }
	// Refused by the gate of a node that has not caught up, which with no
	// leader says "no leader known" (cluster.Membership.Behind): a backup
	// would be refused anyway further on, by a node that "knows no
	// leader", and that refusal would prove nothing.
	if err := try(); connect.CodeOf(err) != connect.CodeUnavailable || !strings.HasSuffix(err.Error(), "unavailable: no leader known") {
		t.Fatalf("removed %s asking the restarted %s (no leader known): %v, want refused as not caught up (unavailable: no leader known)", n4.id, n3.id, err)
	}
	if n3.status(t).GetReady() {
		t.Fatalf("the restarted %s is ready with no other member up", n3.id)
	}
	for _, n := range others {
		startRun(t, n.cfg)
	}
	tries := 1
	await(t, "the restarted n3 caught up (its removed member asked all along)", func() bool {
		tries++
		if err := try(); err == nil {
			t.Fatalf("removed %s was served a backup by the restarted %s (try %d)", n4.id, n3.id, tries)
		}
		return n3.status(t).GetReady()
	})
	if err := try(); err == nil {
		t.Fatalf("removed %s was served a backup by %s once caught up", n4.id, n3.id)
	}
}

// awaitLeader waits for a leader in office among nodes and returns it.
func awaitLeader(t *testing.T, nodes []*runNode) *runNode {
	t.Helper()
	var lead *runNode
	await(t, "a leader in office", func() bool {
		for _, n := range nodes {
			if st := n.status(t); st.GetRole() == "leader" && st.GetReady() {
				lead = n
				return true
			}
		}
		return false
	})
	return lead
}

// removeMember removes member id, asking each of via in turn (a follower
// forwards to the leader) until one answers: an election under way (a
// missed heartbeat on a loaded machine) is answered Unavailable, and a
// removal whose answer was lost is asked again (removing an id that is not
// a member changes nothing).
func removeMember(t *testing.T, via []*runNode, id string) {
	t.Helper()
	var last error
	i := 0
	await(t, "the removal of "+id+" answered", func() bool {
		_, last = via[i%len(via)].client().RemoveMember(context.Background(), connect.NewRequest(&fencev1.RemoveMemberRequest{Id: id}))
		i++
		if last != nil && connect.CodeOf(last) != connect.CodeUnavailable {
			t.Fatalf("RemoveMember %s: %v", id, last)
		}
		return last == nil
	})
}

// peerBackup streams a backup from the raft port's API side at url over c,
// as a peer asks for one (forwarded, as an admin), and returns how it
// ended.
func peerBackup(c connect.HTTPClient, url string) error {
	req := connect.NewRequest(&fencev1.BackupRequest{})
	req.Header().Set(clusterapi.ForwardedHeader, "1")
	req.Header().Set(clusterapi.AdminHeader, "1")
	st, err := fencev1connect.NewMaintenanceServiceClient(c, url).Backup(context.Background(), req)
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Receive() {
	}
	return st.Err()
}
