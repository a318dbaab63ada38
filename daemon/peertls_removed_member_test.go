package daemon

import (
	"context"
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
// removed member through the restarted node's raft port is refused.
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
	// n1 leads (it bootstrapped); make sure before picking n3 and n4.
	await(t, "n1 leads", func() bool { st := n1.status(t); return st.GetRole() == "leader" && st.GetReady() })
	n3, n4 := nodes[2], nodes[3]
	cfg3 := n3.cfg
	n3.stop(t)
	if _, err := n1.client().RemoveMember(context.Background(), connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n4"})); err != nil {
		t.Fatal(err)
	}
	n4.stop(t)
	n3 = startRun(t, cfg3)
	removed := clusterapi.PeerHTTPClient(tlsDial(tlsCert(t, p.ca, "n4"), p.ca.Pool()))
	url := "http://" + cfg3.Cluster.RaftAddr
	try := func() error { return peerBackup(removed, url) }
	tries := 0
	await(t, "the restarted n3 caught up (its removed member asked all along)", func() bool {
		tries++
		if err := try(); err == nil {
			t.Fatalf("removed n4 was served a backup by the restarted n3 (try %d)", tries)
		}
		return n3.status(t).GetReady()
	})
	if err := try(); err == nil {
		t.Fatal("removed n4 was served a backup by n3 once caught up")
	}
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
