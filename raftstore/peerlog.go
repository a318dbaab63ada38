package raftstore

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// peerLog turns raft's per-RPC failures into one line when a peer goes
// unreachable and one when it is heard from again.
//
// While a peer is down raft logs every failed RPC to it — a heartbeat
// about 3 times a second, appendEntries, vote requests — at ERROR. The
// hclog adapter (raftlog.go) hands each of those to fail, which logs
// `raft peer unreachable` (WARN) the first time and nothing after: the
// messages themselves go on at DEBUG. A peer is back when this node reads
// an answer on a connection it dialed to the peer's raft address
// (trackedConn.Read) or when the node learns that peer leads (Mux.PeerHeard):
// `raft peer reachable again` (INFO) with how long it was gone and how many
// RPCs failed meanwhile.
//
// Peers are known by their raft address (what every failure message and
// every dial names); their ids are learned from the messages that carry a
// whole raft.Server.
type peerLog struct {
	now  func() time.Time
	down atomic.Int32 // peers down: reached's fast path when 0

	mu    sync.Mutex
	peers map[string]*peerDown // by raft address
	ids   map[string]string    // raft address -> server id
}

type peerDown struct {
	id       string
	since    time.Time
	failures int
	l        *slog.Logger // the logger of the line that marked it down
}

func newPeerLog() *peerLog {
	return &peerLog{now: time.Now, peers: map[string]*peerDown{}, ids: map[string]string{}}
}

// peerOf reads the peer a raft message names (the value of its "peer" or
// "target" key): a raft.Server, a raft.ServerAddress, or a raft.ServerID.
// ok is false for any other value.
func (p *peerLog) peerOf(v any) (addr, id string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s := v.(type) {
	case raft.Server:
		addr, id = string(s.Address), string(s.ID)
		if addr != "" && id != "" {
			p.ids[addr] = id
		}
	case *raft.Server:
		if s == nil {
			return "", "", false
		}
		return p.peerOfLocked(*s)
	case raft.ServerAddress:
		addr, id = string(s), p.ids[string(s)]
	case raft.ServerID:
		id = string(s)
		for a, i := range p.ids {
			if i == id {
				addr = a
			}
		}
		if addr == "" {
			addr = id // known only by id: keyed by it
		}
	default:
		return "", "", false
	}
	return addr, id, addr != ""
}

func (p *peerLog) peerOfLocked(s raft.Server) (addr, id string, ok bool) {
	addr, id = string(s.Address), string(s.ID)
	if addr != "" && id != "" {
		p.ids[addr] = id
	}
	return addr, id, addr != ""
}

// fail records one failed RPC to the peer at addr (raft's message msg,
// its error err); the first one of an outage logs `raft peer unreachable`.
func (p *peerLog) fail(l *slog.Logger, component, addr, id, msg string, err any) {
	p.mu.Lock()
	d := p.peers[addr]
	if d != nil {
		d.failures++
		if d.id == "" {
			d.id = id
		}
		p.mu.Unlock()
		return
	}
	d = &peerDown{id: id, since: p.now(), failures: 1, l: l}
	p.peers[addr] = d
	p.down.Add(1)
	p.mu.Unlock()
	attrs := []any{"component", component, "peer_id", id, "peer_addr", addr, "failed", msg}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	l.Log(context.Background(), slog.LevelWarn, "raft peer unreachable (raft's per-RPC failures to it are logged at DEBUG until it answers again)", attrs...)
}

// reached records that the peer at addr answered; if it was down, it logs
// `raft peer reachable again` with how long it was gone.
func (p *peerLog) reached(addr string) {
	if p.down.Load() == 0 {
		return
	}
	p.mu.Lock()
	d := p.peers[addr]
	if d != nil {
		delete(p.peers, addr)
		p.down.Add(-1)
	}
	p.mu.Unlock()
	if d == nil {
		return
	}
	d.l.Log(context.Background(), slog.LevelInfo, "raft peer reachable again",
		"component", "raft", "peer_id", d.id, "peer_addr", addr,
		"down_for", p.now().Sub(d.since).Round(time.Millisecond), "failed_rpcs", d.failures)
}

// PeerHeard tells the mux's peer log that the raft peer at addr was heard
// from (it leads: the node learned of it as leader), so a peer logged
// unreachable is logged reachable again even if this node never dials it.
func (m *Mux) PeerHeard(addr string) {
	if addr != "" && addr != m.advertise {
		m.peers.reached(addr)
	}
}

// PeerID tells the mux's peer log the server id of the raft peer at addr,
// so a line about it names both even when raft's message names only the
// address (failed to heartbeat to).
func (m *Mux) PeerID(addr, id string) {
	if addr == "" || id == "" {
		return
	}
	m.peers.mu.Lock()
	m.peers.ids[addr] = id
	m.peers.mu.Unlock()
}
