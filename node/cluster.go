package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// Peer is one voter of a static cluster (Config.Peers): its raft server ID
// and raft address.
type Peer struct {
	ID   string
	Addr string
}

// validateCluster refuses cluster options that cannot work together.
func (c Config) validateCluster() error {
	if !c.cluster() {
		if c.Bootstrap {
			return fence.Invalid("bootstrap", "only with a raft address (cluster mode)", "true")
		}
		if len(c.Peers) > 0 {
			return fence.Invalid("peers", "only with a raft address (cluster mode)", fmt.Sprint(len(c.Peers)))
		}
		return nil
	}
	if c.Transport != nil {
		return fence.Invalid("transport", "not with a mux (the mux carries raft)", "set")
	}
	if c.Bootstrap && len(c.Peers) > 0 {
		return fence.Invalid("bootstrap", "not with peers (peers bootstrap the whole cluster)", "true")
	}
	if len(c.Peers) == 0 {
		return nil
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	self := false
	for _, p := range c.Peers {
		if p.ID == "" || p.Addr == "" {
			return fence.Invalid("peers", "id=raftaddr items with both set", p.ID+"="+p.Addr)
		}
		if ids[p.ID] || addrs[p.Addr] {
			return fence.Invalid("peers", "each id and address once", p.ID+"="+p.Addr)
		}
		ids[p.ID], addrs[p.Addr] = true, true
		if p.ID == c.NodeID {
			if p.Addr != c.Mux.Addr() {
				return fence.Invalid("peers", "this node ("+c.NodeID+") with its raft advertise address "+c.Mux.Addr(), p.ID+"="+p.Addr)
			}
			self = true
		}
	}
	if !self {
		return fence.Invalid("peers", "a list that includes this node's id ("+c.NodeID+")", fmt.Sprint(len(c.Peers))+" peers without it")
	}
	return nil
}

// transport is the raft transport: the given one, the mux's TCP one, or
// an in-memory one for a single node.
func (c Config) transport() raft.Transport {
	switch {
	case c.Transport != nil:
		return c.Transport
	case c.cluster():
		// Timeout bounds one RPC's I/O: a few election timeouts, so a peer
		// that stopped reading is given up on well before the default 10s.
		return c.Mux.Transport(raftstore.TransportConfig{
			Logger:  c.Mux.RaftLogger(c.Logger),
			Timeout: max(5*c.ElectionTimeout, 2*time.Second),
		})
	}
	_, t := raft.NewInmemTransport(raft.ServerAddress(c.NodeID))
	return t
}

// bootstrap writes the first configuration of a data dir without raft
// state: a single node's own, Config.Bootstrap's one voter, or
// Config.Peers; a joining node writes none and waits to be added.
func (n *Node) bootstrap(trans raft.Transport, stable raft.StableStore, snaps raft.SnapshotStore, kind string) error {
	cfg := n.cfg
	local := trans.LocalAddr()
	var servers []raft.Server
	switch {
	case len(cfg.Peers) > 0:
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
	case !cfg.cluster() || cfg.Bootstrap:
		servers = []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: local}}
	default:
		cfg.Logger.Info("new node without bootstrap or peers: waiting to be added to a cluster", "node_id", cfg.NodeID, "raft_addr", local)
		return nil
	}
	if n.startedBefore {
		return &LostStateError{Dir: cfg.DataDir, NodeID: cfg.NodeID}
	}
	if cfg.cluster() && cfg.Bootstrap {
		if err := n.chooseClusterID(); err != nil {
			return err
		}
	}
	if err := raft.BootstrapCluster(cfg.raftConfig(), n.log, stable, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	what := "a new single-node cluster"
	if len(servers) > 1 {
		what = fmt.Sprintf("a new cluster of %d voters", len(servers))
	}
	cfg.Logger.Info("bootstrapped "+what, "data_dir", cfg.DataDir, "node_id", cfg.NodeID, "log_store", kind)
	return nil
}

// ID is this node's raft server ID.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr is this node's raft address (the mux's advertised address; for
// a single node, its in-memory transport's address).
func (n *Node) RaftAddr() string { return n.addr }

// Leader is the current leader's server ID and raft address as this node
// knows them, "" when it knows none. The leader's Fence API is reached
// through its raft address (raftstore.Mux.DialAPI).
func (n *Node) Leader() (id, raftAddr string) {
	addr, sid := n.raft.LeaderWithID()
	return string(sid), string(addr)
}

// IsLeader reports whether this node leads and is in office (its barrier
// done and its clock running): whether it serves requests itself. A node
// that leads but is not in office yet answers ErrNotLeader.
func (n *Node) IsLeader() bool {
	return n.office() != nil && n.raft.State() == raft.Leader
}

// Ready reports whether the node can take part in serving: no fatal error,
// a signing key in the applied state (its grants carry proofs), a leader known, and either this node is in office (and has applied what
// is committed), or it follows and has applied everything it knows to be
// committed. A single node is ready once it took office. (/readyz.)
func (n *Node) Ready() bool {
	if n.fail.Err() != nil || !n.fsm.keyed.Load() {
		return false
	}
	select {
	case <-n.closing:
		return false
	default:
	}
	applied := max(n.fsm.applied.Load(), n.raft.AppliedIndex())
	switch n.raft.State() {
	case raft.Leader:
		return n.office() != nil && applied >= n.raft.CommitIndex()
	case raft.Follower:
		if id, _ := n.Leader(); id == "" {
			return false
		}
		return applied >= n.raft.CommitIndex()
	}
	return false // candidate, shut down
}

// handOver transfers leadership before a cluster leader closes, when some
// other voter can take it, and waits for it at most twice the election
// timeout (raft gives up on its own after one). A failed transfer only
// means the others elect a leader after their election timeout.
func (n *Node) handOver() {
	if !n.cfg.cluster() || n.raft.State() != raft.Leader || n.fail.Err() != nil {
		return
	}
	others, err := n.otherVoters()
	if err != nil || others == 0 {
		return
	}
	start := time.Now()
	f := n.raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	bound := time.NewTimer(2 * n.cfg.ElectionTimeout)
	defer bound.Stop()
	select {
	case err := <-done:
		if err != nil {
			n.cfg.Logger.Warn("leadership transfer before shutdown failed; the others will elect a leader", "err", err)
			return
		}
		to, addr := n.Leader()
		n.cfg.Logger.Info("handed leadership over before shutdown", "to", to, "to_addr", addr, "took", time.Since(start))
	case <-bound.C:
		n.cfg.Logger.Warn("leadership transfer before shutdown timed out; the others will elect a leader", "bound", 2*n.cfg.ElectionTimeout)
	}
}

// otherVoters counts the voters of the latest configuration other than
// this node.
func (n *Node) otherVoters() (int, error) {
	f := n.raft.GetConfiguration()
	err, ok := n.await(context.Background(), f)
	if !ok {
		return 0, ErrClosed
	}
	if err != nil {
		return 0, err
	}
	others := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != raft.ServerID(n.cfg.NodeID) {
			others++
		}
	}
	return others, nil
}

// watchRules warns, on a cluster node that does not lead, when the rules
// recorded in the log differ from its own flags (Config.Rules): at start
// and whenever the recorded rules change. The log's rules are in force on
// every replica; a node's flags only count when it leads (takeOffice
// proposes them), so an operator who changed one node's flags is told.
func (n *Node) watchRules() {
	defer n.wg.Done()
	var warned state.Config
	for {
		n.persistClusterID()
		if n.raft.State() == raft.Leader {
			// While it leads, its own flags are (or are being) recorded:
			// a later leader's other rules are news again.
			warned = state.Config{}
		} else {
			var recorded state.Config
			var configured bool
			n.fsm.read(func(m *state.Machine) { recorded, configured = m.Config(), m.Configured() })
			switch {
			case !configured || recorded == n.cfg.Rules:
				warned = state.Config{}
			case recorded != warned:
				n.cfg.Logger.Warn("the flags' rules differ from the rules recorded in the log; the log wins, and the leader's flags propose (this node's apply only when it leads)",
					"flags", fmt.Sprintf("%+v", n.cfg.Rules), "log", fmt.Sprintf("%+v", recorded))
				warned = recorded
			}
		}
		select {
		case <-n.closing:
			return
		case <-n.fsm.rulesC:
		}
	}
}
