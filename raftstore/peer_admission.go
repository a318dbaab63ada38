package raftstore

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Peer admission: which node a connection accepted under peer TLS may be,
// and for how long.
//
// A member of the raft configuration (SetMembers). While the mux knows no
// configuration (before SetMembers, or its function answers none), only a
// mux that is open while empty admits any node of the CA: a node that
// started with an empty data dir waits to be reached by the leader that
// adds it, and has nothing to guard. A node whose data dir holds a
// configuration is closed until it has read it (PeersClosedUntilKnown,
// then OpenWhileEmpty(false)): an outside test connected a spare
// certificate of the CA to a node in the moment of its start, and the
// connection, accepted then, kept serving it as a peer.
//
// And an accepted connection is a member's only while its node is one:
// SweepPeers closes every accepted connection whose node has left the
// configuration (the mux sweeps every peerSweepEvery), so a removed
// member's open connections end with its membership.

// PeersClosedUntilKnown makes a peer TLS mux admit no node while it knows
// no configuration, from its first accepted connection on, until
// OpenWhileEmpty(true) (a node that started empty) or SetMembers gives it
// a configuration with members.
func PeersClosedUntilKnown() MuxOption {
	return func(x *Mux) { x.closedEmpty = true }
}

// OpenWhileEmpty sets whether any node of the CA is admitted while the
// configuration is unknown or empty (the default without
// PeersClosedUntilKnown).
func (m *Mux) OpenWhileEmpty(open bool) {
	m.mu.Lock()
	m.closedEmpty = !open
	m.mu.Unlock()
}

// AdmitsPeer reports whether node id may be served as a peer now: a
// member of the configuration, or any node while the configuration is
// unknown or empty and the mux is open while empty. The server asks it at
// every call that came through the raft port.
func (m *Mux) AdmitsPeer(id string) bool {
	members := m.currentMembers()
	if len(members) == 0 {
		m.mu.Lock()
		closed := m.closedEmpty
		m.mu.Unlock()
		return !closed
	}
	for _, s := range members {
		if s.ID == id {
			return true
		}
	}
	return false
}

// peerSweepEvery is how often the mux closes accepted connections of
// nodes that have left the configuration.
const peerSweepEvery = time.Second

// peerAdmission is the mux's record of accepted peer connections (fields
// of Mux, under m.mu).
type peerAdmission struct {
	closedEmpty bool                   // PeersClosedUntilKnown / OpenWhileEmpty
	accepted    map[*peerConn]struct{} // accepted and handed out, not yet closed
}

// track records an accepted peer connection until it closes.
func (m *Mux) track(pc *peerConn) {
	m.mu.Lock()
	if m.accepted == nil {
		m.accepted = map[*peerConn]struct{}{}
	}
	m.accepted[pc] = struct{}{}
	m.mu.Unlock()
	pc.untrack = func() {
		m.mu.Lock()
		delete(m.accepted, pc)
		m.mu.Unlock()
	}
}

// SweepPeers closes every accepted peer connection whose node is no longer
// admitted (AdmitsPeer), logging and counting each as a refusal, and
// returns how many it closed.
func (m *Mux) SweepPeers() int {
	m.mu.Lock()
	var out []*peerConn
	for pc := range m.accepted {
		out = append(out, pc)
	}
	m.mu.Unlock()
	n := 0
	for _, pc := range out {
		if m.AdmitsPeer(pc.id) {
			continue
		}
		pc.Close()
		n++
		m.logPeerRefusal("accepted", pc.RemoteAddr().String(), pc.id, fmt.Errorf("node %s is no longer a member of the configuration: its connection is closed", pc.id))
	}
	return n
}

// sweepLoop runs SweepPeers every peerSweepEvery until the mux closes.
func (m *Mux) sweepLoop() {
	defer m.wg.Done()
	t := time.NewTicker(peerSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.closed:
			return
		case <-t.C:
			m.SweepPeers()
		}
	}
}

// peerConn is a connection whose other side proved, by TLS, to be node id.
type peerConn struct {
	net.Conn
	id      string
	once    sync.Once
	untrack func() // accepted ones: forget it in the mux (track)
}

// PeerNodeID is the node id the other side's certificate names (what
// clusterapi.PeerNodeID reads through the wrappers; countedConn has
// NetConn for it).
func (c *peerConn) PeerNodeID() string { return c.id }

// Close closes the connection and forgets it in the mux.
func (c *peerConn) Close() error {
	c.once.Do(func() {
		if c.untrack != nil {
			c.untrack()
		}
	})
	return c.Conn.Close()
}
