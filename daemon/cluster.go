package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/internal/nodeview"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/server"
)

// clusterParts are what cluster mode adds to a server: the raft port (raft
// and, multiplexed, the API for other nodes), the leader forwarder the
// handlers call, and the membership API. A single node has only the
// membership API (a cluster of one).
type clusterParts struct {
	mux     *raftstore.Mux     // nil alone
	certs   *certReloader      // the raft port's peer TLS (nil without)
	fwd     *cluster.Forwarder // nil alone
	members *cluster.Membership
	peers   *server.ClusterPeers // other nodes' ClusterService, for members
	served  chan error           // the raft port's API Serve result (cluster mode)

	joinCancel  context.CancelFunc // ends a join under way (close)
	watchCancel context.CancelFunc // ends WatchFresh (close)
	bg          sync.WaitGroup     // the join and WatchFresh

	closeOnce sync.Once
}

// withCluster completes the node's config from cfg.Cluster: raft's
// timeouts and the test hooks' clock (a single node too), and in
// cluster mode the raft port, which it opens: the caller closes it
// (clusterParts.close) if the node does not open.
func withCluster(cfg Config, h Hooks, nc node.Config) (node.Config, *clusterParts, error) {
	c := cfg.Cluster
	nc.HeartbeatTimeout, nc.ElectionTimeout, nc.LeaderLeaseTimeout, nc.CommitTimeout = c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout
	nc.Clock = h.Clock
	cp := &clusterParts{}
	if !c.enabled() {
		if cfg.PeerTLSEnabled() {
			return nc, nil, ErrPeerTLSAlone
		}
		return nc, cp, nil
	}
	opts := []raftstore.MuxOption{raftstore.WithDialer(h.Dialer), raftstore.WithMuxLogger(cfg.Logger)}
	if cfg.PeerTLSEnabled() {
		certs, err := newPeerCertReloader(cfg)
		if err != nil {
			return nc, nil, err
		}
		cp.certs = certs
		// Closed to every node until the node has read its configuration
		// (watchMembers): a spare certificate of the CA is no member.
		opts = append(opts, raftstore.WithPeerTLS(certs.peerCerts), raftstore.PeersClosedUntilKnown())
	}
	mux, err := raftstore.Listen(c.RaftAddr, c.RaftAdvertise, opts...)
	if err != nil {
		return nc, nil, err
	}
	if err := checkExposure(cfg, "raft", "--raft-addr", c.RaftAddr, mux.BindAddr(), cfg.PeerTLSEnabled()); err != nil {
		mux.Close()
		return nc, nil, err
	}
	cp.mux = mux
	nc.Mux, nc.Bootstrap, nc.Peers = mux, c.Bootstrap, c.Peers
	// Started empty, it answers raft only once a leader says it adds it:
	// a leader that lists its id already (its data dir lost) is refused.
	nc.AdmitOnAdd = true
	return nc, cp, nil
}

// watchMembers gives the raft port node n's configuration (peer TLS lets
// members in, and checks the member at an address dialed). A node that
// started with no configuration (an empty data dir waiting to be added)
// admits any node of the CA until it has one; once it has seen members, an
// unknown configuration (a read that fails) admits none.
func (cp *clusterParts) watchMembers(n *node.Node) {
	if cp.mux == nil {
		return
	}
	mux := cp.mux
	members := func() []raftstore.Member {
		ms, err := n.Members(context.Background())
		if err != nil {
			return nil
		}
		out := make([]raftstore.Member, len(ms))
		for i, m := range ms {
			out[i] = raftstore.Member{ID: m.ID, Addr: m.Addr}
		}
		return out
	}
	var seen atomic.Bool
	mux.SetMembers(func() []raftstore.Member {
		out := members()
		if len(out) > 0 && !seen.Swap(true) {
			mux.OpenWhileEmpty(false)
		}
		return out
	})
	if len(members()) == 0 {
		mux.OpenWhileEmpty(true)
	}
}

// peerAdmitted is the server's check of a peer port call's node (nil
// without peer TLS: no node id to check).
func (cp *clusterParts) peerAdmitted() func(string) bool {
	if cp.mux == nil || !cp.mux.PeerTLS() {
		return nil
	}
	return cp.mux.AdmitsPeer
}

// peerMetrics are the raft port's peer TLS metrics (none without).
func (cp *clusterParts) peerMetrics() []prometheus.Collector {
	if cp.mux == nil || cp.certs == nil {
		return nil
	}
	mux := cp.mux
	refused := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "fence_peer_tls_refused_total",
		Help: "Raft port connections (accepted or dialed) refused by peer TLS: no or a bad certificate, another CA, a node that is not a member or not the one dialed.",
	}, func() float64 { return float64(mux.PeerRefusals()) })
	return append(cp.certs.collectors(), refused)
}

// service is the fence.Service for node n: cfg.Service's if set, the
// leader forwarder in cluster mode, else the node's own.
func (cp *clusterParts) service(cfg Config, n *node.Node) (fence.Service, error) {
	cp.peers = server.NewClusterPeers(cp.dial())
	cp.peers.JoinAuthToken = cfg.Cluster.JoinAuthToken
	cp.members = cluster.NewMembership(n, cluster.Config{RaftAddr: cp.raftAddr(), Peer: cp.peers.Peer, Join: cp.peers.JoinPeer, Logger: cfg.Logger})
	switch {
	case cfg.Service != nil:
		return cfg.Service(n)
	case cp.mux != nil:
		cp.fwd = cluster.NewForwarder(n.Service(), n, cp.mux.DialAPI, server.LeaderService)
		return cp.fwd, nil
	}
	return n.Service(), nil
}

func (cp *clusterParts) raftAddr() string {
	if cp.mux == nil {
		return ""
	}
	return cp.mux.Addr()
}

func (cp *clusterParts) dial() cluster.DialFunc {
	if cp.mux == nil {
		return nil
	}
	return cp.mux.DialAPI
}

// serve serves the API (the same handler as the client port) to other
// nodes on the raft port, until the server shuts down.
func (cp *clusterParts) serve(d *Daemon) {
	if cp.mux == nil {
		return
	}
	wctx, cancel := context.WithCancel(context.Background())
	cp.watchCancel = cancel
	cp.bg.Go(func() { cp.members.WatchFresh(wctx) })
	cp.bg.Go(func() { cp.members.WatchCaughtUp(wctx) })
	cp.served = make(chan error, 1)
	d.log.Info("raft port open: raft and, for other nodes, the API", "node_id", d.node.ID(), "raft_addr", cp.mux.Addr(), "bind", cp.mux.BindAddr().String())
	go func() { cp.served <- d.srv.ServePeers(cp.mux.APIListener()) }()
}

// joinFailed starts asking cfg.Cluster.Join's nodes to add this one
// (cluster.Membership.Join, bounded by cfg.ReadyTimeout) and returns a
// channel that yields the error if that fails; nil (never ready) without
// --join. ctx ending first is not a failure.
func (cp *clusterParts) joinFailed(ctx context.Context, cfg Config) <-chan error {
	if len(cfg.Cluster.Join) == 0 || cp.mux == nil {
		return nil
	}
	failed := make(chan error, 1)
	jctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	cp.joinCancel = cancel
	cp.bg.Go(func() {
		defer cancel()
		if err := cp.members.Join(jctx, cfg.Cluster.Join); err != nil && ctx.Err() == nil && !errors.Is(jctx.Err(), context.Canceled) {
			failed <- fmt.Errorf("%w (--ready-timeout %s)", err, cfg.ReadyTimeout)
		}
	})
	return failed
}

// close releases what cluster mode holds, after the node closed (its
// leadership hand-over on close needs the raft port).
func (cp *clusterParts) close(log *slog.Logger) {
	if cp == nil {
		return
	}
	cp.closeOnce.Do(func() { cp.closeNow(log) })
}

func (cp *clusterParts) closeNow(log *slog.Logger) {
	for _, cancel := range []context.CancelFunc{cp.joinCancel, cp.watchCancel} {
		if cancel != nil {
			cancel()
		}
	}
	cp.bg.Wait()
	if cp.fwd != nil {
		cp.fwd.Close()
	}
	if cp.peers != nil {
		cp.peers.Close()
	}
	if cp.mux != nil {
		if err := cp.mux.Close(); err != nil {
			log.Warn("closing the raft port", "err", err)
		}
		if cp.served != nil {
			if err := <-cp.served; err != nil {
				log.Warn("serving the API on the raft port", "err", err)
			}
		}
	}
}

// errorKinds are the node's and the cluster's errors the server answers
// specially.
var errorKinds = server.ErrorKinds{
	NotLeader: node.ErrNotLeader, UnknownOutcome: node.ErrUnknownOutcome, Closed: node.ErrClosed,
	ChangeRefused: nodeview.ChangeRefused, WatchBehind: node.ErrWatchBehind,
}
