package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/internal/certgen"
	"github.com/fenceworks/fence/raftstore"
)

// peerPKI is the cluster's peer CA and another CA, with their CA files.
type peerPKI struct {
	dir             string
	ca, other       *certgen.CA
	caFile, otherCA string
}

func newPeerPKI(t *testing.T) *peerPKI {
	t.Helper()
	p := &peerPKI{dir: t.TempDir()}
	var err error
	if p.ca, err = certgen.NewCA("fence peer CA", 0); err != nil {
		t.Fatal(err)
	}
	if p.other, err = certgen.NewCA("another CA", 0); err != nil {
		t.Fatal(err)
	}
	p.caFile, p.otherCA = filepath.Join(p.dir, "ca.crt"), filepath.Join(p.dir, "other-ca.crt")
	for f, ca := range map[string]*certgen.CA{p.caFile: p.ca, p.otherCA: p.other} {
		if err := os.WriteFile(f, ca.CertPEM(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// peerOptions are a peer certificate's options: it names node id.
func peerOptions(id string) certgen.Options {
	return certgen.Options{CommonName: id, URIs: []*url.URL{raftstore.NodeURI(id)}}
}

// write issues a peer certificate naming id, signed by ca, into files
// named file (.crt, .key) and returns them.
func (p *peerPKI) write(t *testing.T, ca *certgen.CA, id, file string) (certFile, keyFile string) {
	t.Helper()
	c, k, _, err := ca.Issue(peerOptions(id))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, file+".crt"), filepath.Join(p.dir, file+".key")
	if err := certgen.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := certgen.WriteFile(certFile, c, 0o644); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// tlsCert is a peer certificate naming id, signed by ca, in memory.
func tlsCert(t *testing.T, ca *certgen.CA, id string) tls.Certificate {
	t.Helper()
	c, err := ca.TLSCertificate(peerOptions(id))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// peerConfig is clusterConfig with peer TLS: id's own certificate from
// the peer CA.
func (p *peerPKI) peerConfig(t *testing.T, id string, cc ClusterConfig) Config {
	cfg := clusterConfig(t, id, cc)
	cfg.PeerCertFile, cfg.PeerKeyFile = p.write(t, p.ca, id, id)
	cfg.PeerTrustedCAFile = p.caFile
	return cfg
}

// peerStatus asks the node at raftAddr for its status over its raft port,
// as a peer does, through dial.
func peerStatus(raftAddr string, dial clusterapi.DialFunc) error {
	c := fencev1connect.NewClusterServiceClient(clusterapi.PeerHTTPClient(dial), "http://"+raftAddr)
	ctx, cancel := context.WithTimeout(context.Background(), clusterWait)
	defer cancel()
	_, err := c.NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
	return err
}

// tlsDial dials the raft port's API side over peer TLS with cert, trusting
// roots.
func tlsDial(cert tls.Certificate, roots *x509.CertPool) clusterapi.DialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return raftstore.DialAPITLS(ctx, addr, cert, roots)
	}
}

// A 3-node cluster whose raft ports speak mutual TLS forms (bootstrap and
// two joins, the second through a follower), elects, lists its members
// with their status, and forwards calls. Then strangers try every door of
// the raft port, and none opens:
//   - a process with a certificate from another CA cannot join (--join);
//   - a node whose certificate names another node id than the one it
//     claims is not added;
//   - a node with a certificate of the peer CA that is not a member, and
//     one from another CA naming a member, cannot reach the API through
//     the raft port (so cannot forward), nor ask a member for its vote;
//   - plaintext, API or raft, to a TLS raft port is refused.
//
// The refusals are logged (at most one line a second) and counted in
// fence_peer_tls_refused_total, and the cluster goes on serving: same
// leader, same term, same members, calls forwarded.
func TestPeerTLSClusterRefusesStrangers(t *testing.T) {
	t.Parallel()
	p := newPeerPKI(t)
	n1 := startRun(t, p.peerConfig(t, "n1", ClusterConfig{Bootstrap: true}))
	n1.awaitReady(t)
	n2 := startRun(t, p.peerConfig(t, "n2", ClusterConfig{Join: []string{n1.url}}))
	n2.awaitReady(t)
	n3 := startRun(t, p.peerConfig(t, "n3", ClusterConfig{Join: []string{n2.url}})) // AddMember forwarded by n2
	n3.awaitReady(t)
	nodes := []*runNode{n1, n2, n3}
	for _, n := range nodes {
		await(t, n.id+" lists 3 ready voters, each reporting itself", func() bool {
			ms := n.members(t)
			if !slices.Equal(ids(ms), []string{"n1", "n2", "n3"}) {
				return false
			}
			for _, m := range ms {
				if m.GetStatus() == nil || !m.GetStatus().GetReady() || m.GetStatus().GetLeaderId() != "n1" {
					return false
				}
			}
			return true
		})
	}
	acquire := func(n *runNode, name string) {
		t.Helper()
		_, err := n.locks().Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "o", Ttl: durationpb.New(time.Minute)}))
		if err != nil {
			t.Fatalf("Acquire %s through %s: %v", name, n.id, err)
		}
	}
	acquire(n3, "before") // forwarded to n1 over peer TLS
	term := n1.status(t).GetTerm()

	// 1. --join with a certificate of another CA: the leader cannot reach
	// it as a peer, and does not add it.
	rogue := clusterConfig(t, "n4", ClusterConfig{Join: []string{n1.url}})
	rogue.PeerCertFile, rogue.PeerKeyFile = p.write(t, p.other, "n4", "n4-other")
	rogue.PeerTrustedCAFile = p.otherCA
	rogue.ReadyTimeout = 3 * time.Second // how long it asks before Run gives up
	r := startRun(t, rogue)
	select {
	case err := <-r.done:
		if err == nil || !strings.Contains(err.Error(), "join") {
			t.Errorf("a node with another CA's certificate: Run = %v, want it not added (join failed)\n%s", err, r.logs.String())
		}
		r.done <- err
	case <-time.After(clusterWait):
		t.Errorf("a node with another CA's certificate still runs after %s: added? members %v", clusterWait, ids(n1.members(t)))
		r.stop(t)
	}

	// 2. A node that claims n5 with a certificate (of the peer CA) naming
	// n9: AddMember — what --join asks — is refused naming both. (Run
	// refuses to start such a node; New does not check, as a hostile
	// process would not.)
	fake := clusterConfig(t, "n5", ClusterConfig{})
	fake.PeerCertFile, fake.PeerKeyFile = p.write(t, p.ca, "n9", "n9")
	fake.PeerTrustedCAFile = p.caFile
	fake.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	fd, err := New(fake)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	_, err = n2.client().AddMember(context.Background(), connect.NewRequest(&fencev1.AddMemberRequest{Id: "n5", RaftAddr: fake.Cluster.RaftAddr}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "is n9, not n5") {
		t.Fatalf("AddMember of a node claiming n5 with a certificate naming n9: %v, want failed_precondition naming n9 and n5", err)
	}

	// 3. The raft port's API side, as a peer reaches it: a member's
	// certificate opens it (the control), a non-member's of the peer CA, a
	// member id's from another CA and plaintext do not.
	n1raft := n1.cfg.Cluster.RaftAddr
	if err := peerStatus(n1raft, tlsDial(tlsCert(t, p.ca, "n2"), p.ca.Pool())); err != nil {
		t.Fatalf("NodeStatus over n1's raft port with member n2's certificate: %v", err)
	}
	for _, tc := range []struct {
		what string
		dial clusterapi.DialFunc
	}{
		{"a non-member's certificate of the peer CA (n9)", tlsDial(tlsCert(t, p.ca, "n9"), p.ca.Pool())},
		{"another CA's certificate naming member n2", tlsDial(tlsCert(t, p.other, "n2"), p.ca.Pool())},
		{"plaintext", raftstore.DialAPI},
	} {
		for _, n := range nodes {
			if err := peerStatus(n.cfg.Cluster.RaftAddr, tc.dial); err == nil {
				t.Errorf("NodeStatus over %s's raft port with %s: answered, want the connection refused", n.id, tc.what)
			}
		}
	}
	// A forwarded call (the marker a peer sets) from a stranger is
	// refused with its connection: it never reaches the handler.
	req := connect.NewRequest(&fencev1.RemoveMemberRequest{Id: "n3"})
	req.Header().Set(clusterapi.ForwardedHeader, "1")
	stranger := fencev1connect.NewClusterServiceClient(clusterapi.PeerHTTPClient(tlsDial(tlsCert(t, p.ca, "n9"), p.ca.Pool())), "http://"+n1raft)
	if _, err := stranger.RemoveMember(context.Background(), req); err == nil {
		t.Error("RemoveMember forwarded to the leader by a non-member: done, want the connection refused")
	}

	// 4. Raft itself: a non-member of the peer CA, and a member id's
	// certificate from another CA, ask every member for its vote at a
	// term far ahead, and send entries as a leader of that term; plaintext
	// raft too.
	for _, tc := range []struct {
		what string
		opts []raftstore.MuxOption
	}{
		{"non-member n9 of the peer CA", []raftstore.MuxOption{raftstore.WithPeerTLS(func() (tls.Certificate, *x509.CertPool) { return tlsCert(t, p.ca, "n9"), p.ca.Pool() })}},
		{"n2's id from another CA", []raftstore.MuxOption{raftstore.WithPeerTLS(func() (tls.Certificate, *x509.CertPool) { return tlsCert(t, p.other, "n2"), p.ca.Pool() })}},
		{"plaintext", nil},
	} {
		mux, err := raftstore.Listen("127.0.0.1:0", "", append(tc.opts, raftstore.WithMuxLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
		if err != nil {
			t.Fatal(err)
		}
		trans := mux.Transport(raftstore.TransportConfig{Timeout: 5 * time.Second})
		for _, n := range nodes {
			var vote raft.RequestVoteResponse
			err := trans.RequestVote(raft.ServerID(n.id), raft.ServerAddress(n.cfg.Cluster.RaftAddr), &raft.RequestVoteRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: []byte(mux.Addr())}, Term: term + 1000, LastLogIndex: 1 << 40, LastLogTerm: term + 999,
			}, &vote)
			if err == nil {
				t.Errorf("RequestVote from %s to %s: answered (granted %t), want the connection refused", tc.what, n.id, vote.Granted)
			}
			var app raft.AppendEntriesResponse
			err = trans.AppendEntries(raft.ServerID(n.id), raft.ServerAddress(n.cfg.Cluster.RaftAddr), &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n2"), Addr: []byte(mux.Addr())}, Term: term + 1000, LeaderCommitIndex: 1 << 40,
			}, &app)
			if err == nil {
				t.Errorf("AppendEntries from %s to %s: answered (success %t), want the connection refused", tc.what, n.id, app.Success)
			}
		}
		trans.(raft.WithClose).Close()
		mux.Close()
	}

	// The cluster went on: same leader in the same term, three members,
	// calls forwarded.
	for _, n := range nodes {
		st := n.status(t)
		if st.GetLeaderId() != "n1" || st.GetTerm() != term {
			t.Errorf("%s: leader %q term %d after the strangers, want n1 in term %d", n.id, st.GetLeaderId(), st.GetTerm(), term)
		}
		if got := ids(n.members(t)); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
			t.Errorf("%s lists %v after the strangers, want n1 n2 n3", n.id, got)
		}
	}
	acquire(n2, "after")

	// Logged, at most a line a second, and counted.
	logs := n1.logs.String()
	lines := strings.Count(logs, "peer connection refused")
	if lines == 0 {
		t.Fatalf("n1 logged no refused peer connection:\n%s", logs)
	}
	res, err := http.Get(n1.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	refused := metricValue(t, string(body), "fence_peer_tls_refused_total")
	if refused < 9 {
		t.Errorf("fence_peer_tls_refused_total = %v on n1, want at least the 9 connections refused above", refused)
	}
	if float64(lines) >= refused {
		t.Errorf("n1 logged %d refusal lines for %v refusals: not rate-limited", lines, refused)
	}
	for _, m := range []string{"fence_peer_tls_cert_not_after_seconds", "fence_peer_tls_reload_failures_total"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("n1's /metrics lacks %s", m)
		}
	}
}

// metricValue reads an unlabelled metric from a Prometheus text page.
func metricValue(t *testing.T, page, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: %q: %v", name, v, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}
