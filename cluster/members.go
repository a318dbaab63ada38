package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/internal/buildinfo"
	"github.com/fenceworks/fence/node"
)

// DefaultStatusTimeout bounds Members' wait for each member's NodeStatus: a
// member that has not answered by then is listed as unreachable (on a LAN
// a live node answers in well under a millisecond).
const DefaultStatusTimeout = time.Second

// leaderWait bounds how long a change asked of a node that knows no
// leader waits for one (an election takes about an election timeout: 1s
// with the cluster defaults).
const leaderWait = 3 * time.Second

// addCheckTimeout bounds AddMember's wait for the new node's status.
const addCheckTimeout = 3 * time.Second

// transferSettle bounds how long TransferLeadership waits, after raft
// reports the transfer done, to learn the new leader's id for its reply.
const transferSettle = 2 * time.Second

// Membership answers the ClusterService for one node (see the package
// doc): listing from its own view, changes on the leader (forwarded there
// from a follower), its own status. Methods are safe for concurrent use.
type Membership struct {
	node          *node.Node
	addr          string   // this node's advertised raft address; "" alone
	peer          PeerFunc // calls to other nodes by raft address; nil alone
	joinPeer      JoinFunc // calls to --join URLs (client ports)
	statusTimeout time.Duration
	log           *slog.Logger

	mu    sync.Mutex
	fresh map[string]freshJoin // ids added for a fresh join (noteAddedFresh)

	expectAdd atomic.Bool // this node asked to join, or a leader said it adds it (WatchFresh)

	caught caughtUp // caughtup.go
}

// Config configures a Membership.
type Config struct {
	// RaftAddr is this node's advertised raft address (raftstore.Mux.Addr).
	// Empty: a single node (no --raft-addr), which cannot change membership.
	RaftAddr string
	// Peer calls another node's membership API by its raft address.
	// Required with RaftAddr.
	Peer PeerFunc
	// Join calls the membership API of a --join URL (another node's client
	// port). Required for Membership.Join.
	Join JoinFunc
	// StatusTimeout bounds the wait for each member's NodeStatus in
	// Members; default DefaultStatusTimeout.
	StatusTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// NewMembership returns the membership API of node n.
func NewMembership(n *node.Node, cfg Config) *Membership {
	m := &Membership{node: n, addr: cfg.RaftAddr, joinPeer: cfg.Join, statusTimeout: cfg.StatusTimeout, log: cfg.Logger, fresh: map[string]freshJoin{}}
	if cfg.RaftAddr != "" {
		m.peer = cfg.Peer
	}
	if m.statusTimeout <= 0 {
		m.statusTimeout = DefaultStatusTimeout
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	return m
}

func (m *Membership) single() bool { return m.peer == nil }

// NodeStatus is this node's view of itself: role, the leader it knows,
// indexes, readiness. adding: the caller is a leader about to add this
// node (see WatchFresh).
func (m *Membership) NodeStatus(adding bool) NodeStatus {
	if adding {
		m.expectAdd.Store(true)
		// A leader about to add this node: if it started empty, it
		// answers raft from here (node.Config.AdmitOnAdd).
		m.node.Admit()
	}
	st := m.node.Status()
	r := NodeStatus{
		ID: st.ID, RaftAddr: m.addr, Role: strings.ToLower(st.Role),
		LeaderID: st.LeaderID, LeaderAddr: st.LeaderAddr, Term: st.Term,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, LastToken: uint64(st.LastToken),
		Ready:     m.node.Ready() && m.CaughtUp(),
		ClusterID: st.ClusterID,
		Sessions:  uint64(max(st.Sessions, 0)), LeasesHeld: uint64(max(m.node.HeldLeases(), 0)),
		Waiters: uint64(max(st.Waiters, 0)), Queued: uint64(max(st.Queued, 0)),
		Slack:     st.Slack,
		Resources: uint64(max(st.Resources, 0)), ResourceBytes: uint64(max(st.ResourceBytes, 0)),
		OldestIDAge:   st.OldestIDAge,
		RememberedOps: uint64(st.IDMemory.Ops), RememberedRequests: uint64(st.IDMemory.Requests),
		IDMemoryNearCap: st.IDMemoryNearCap, SnapshotBytes: st.SnapshotBytes,
		Version: buildinfo.Version(),
	}
	// The leader clock in office; else the server time of the last
	// command applied.
	serverTime := st.ServerTime
	if !st.InOffice {
		serverTime = st.StateTime
	}
	r.ServerTime = time.Duration(serverTime)
	if st.Fatal != nil {
		r.Fatal = st.Fatal.Error()
	}
	if b, err := m.node.DataDirBytes(); err == nil {
		r.DataDirBytes = b
	} else {
		m.log.Debug("data dir size unknown", "err", err)
	}
	if m.single() {
		// raft knows the leader (itself) by its in-memory transport
		// address, which is no address anyone can reach (see Members).
		r.LeaderAddr = ""
	}
	if !st.LastContact.IsZero() {
		r.LastContact = time.Since(st.LastContact)
	}
	return r
}

// Members lists the members of the latest configuration this node knows,
// each with the status it reports (asked concurrently, StatusTimeout each).
func (m *Membership) Members(ctx context.Context) (MemberList, error) {
	self := m.NodeStatus(false)
	if m.single() {
		// raft's configuration holds an in-memory transport address here:
		// the node is reached at its client URL, there is no raft address.
		return MemberList{AnsweredBy: self.ID, Members: []Member{{
			ID: self.ID, Suffrage: Voter, Leader: self.Role == "leader", Status: &self,
		}}}, nil
	}
	conf, err := m.node.Members(ctx)
	if err != nil {
		return MemberList{}, err
	}
	out := make([]Member, len(conf))
	// A node that has not caught up since it started lists its
	// configuration and its own status only: the server judged the call by
	// a replica that may not know the cluster's authentication yet, so the
	// other members' status (the leader's among them) is not asked for it.
	caught := m.CaughtUp()
	var wg sync.WaitGroup
	for i, c := range conf {
		mem := &out[i]
		*mem = Member{ID: c.ID, RaftAddr: c.Addr, Suffrage: Nonvoter, Leader: c.ID == self.LeaderID}
		if c.Voter {
			mem.Suffrage = Voter
		}
		if c.ID == self.ID {
			mem.Status = &self
			continue
		}
		if !caught {
			mem.Error = "not asked: this node has not caught up with its cluster since it started"
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, m.statusTimeout)
			defer cancel()
			st, err := m.peer(c.Addr, false).NodeStatus(sctx, false)
			switch {
			case err != nil:
				mem.Error = "unreachable: " + err.Error()
			case st.ID != c.ID:
				// Another node took the member's address: its status is
				// not the member's.
				mem.Error = fmt.Sprintf("wrong node: the node at %s is %s", c.Addr, st.ID)
			default:
				mem.Status = &st
			}
		})
	}
	wg.Wait()
	return MemberList{Members: out, AnsweredBy: self.ID}, nil
}

// AddMember adds voter id at raftAddr, on the leader; it returns once the
// new configuration is committed. forwarded: the call came from another
// node (ForwardedHeader) and must not be forwarded again. fresh: the node
// asking has an empty data dir; it is refused if id is a member already
// (a voter whose data was lost: see checkFresh).
func (m *Membership) AddMember(ctx context.Context, forwarded bool, id, raftAddr string, fresh bool, joinID string) error {
	if err := ValidateID("id", id); err != nil {
		return err
	}
	if err := ValidateRaftAddr("raft_addr", raftAddr); err != nil {
		return err
	}
	if m.single() {
		return ErrSingleNode
	}
	return m.onLeader(ctx, forwarded,
		func() error {
			member, err := m.checkNoConflict(ctx, id, raftAddr)
			if err != nil {
				return err
			}
			if member && fresh && !m.addedFresh(id, joinID) {
				return &ConflictError{ID: id, RaftAddr: raftAddr, MemberID: id, MemberAddr: raftAddr, Fresh: true}
			}
			if !member {
				if err := m.checkIsThere(ctx, id, raftAddr); err != nil {
					return err
				}
				if fresh {
					m.noteAddedFresh(id, joinID)
				}
			}
			return m.node.AddVoter(ctx, id, raftAddr)
		},
		func(p Peer) error {
			return p.AddMember(ctx, AddMemberRequest{ID: id, RaftAddr: raftAddr, Fresh: fresh, JoinID: joinID})
		})
}

// checkNoConflict refuses to add id at raftAddr when another member has
// that id at another address, or that address under another id. raft would
// take the first as a move of the member (a second node started with the
// same --node-id, the default fence-1 say, would silently take the first
// one's place), and the second as two members at one address.
// It reports whether id is a member at raftAddr already.
func (m *Membership) checkNoConflict(ctx context.Context, id, raftAddr string) (member bool, err error) {
	conf, err := m.node.Members(ctx)
	if err != nil {
		return false, err
	}
	for _, c := range conf {
		if (c.ID == id) != (c.Addr == raftAddr) {
			return false, &ConflictError{ID: id, RaftAddr: raftAddr, MemberID: c.ID, MemberAddr: c.Addr}
		}
		member = member || c.ID == id
	}
	return member, nil
}

// freshRetryWindow is how long a leader takes a fresh join of an id it has
// just added for a retry of that join (its reply lost, or the attempt timed
// out while the change committed) rather than an empty data dir taking a
// member's place.
const freshRetryWindow = time.Minute

// freshJoin is a fresh join this node (the leader) made: the joining
// process's join id, and when.
type freshJoin struct {
	joinID string
	at     time.Time
}

// noteAddedFresh records that this node (the leader) is adding id for the
// fresh join joinID.
func (m *Membership) noteAddedFresh(id, joinID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for k, j := range m.fresh {
		if now.Sub(j.at) > freshRetryWindow {
			delete(m.fresh, k)
		}
	}
	m.fresh[id] = freshJoin{joinID, now}
}

// addedFresh reports whether this node added id for the fresh join joinID
// (the same joining process) within freshRetryWindow. A leader change
// forgets it: a retry then is refused, which errs on the safe side (the
// joiner stops; restarted, it has the state it was sent).
func (m *Membership) addedFresh(id, joinID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.fresh[id]
	return ok && joinID != "" && j.joinID == joinID && time.Since(j.at) <= freshRetryWindow
}

// checkIsThere asks the node at raftAddr for its status before it is
// added: it must answer, and be id. A voter added that nobody can reach
// counts toward every quorum from then on; in a cluster of one it is a
// quorum of two that can never commit again — not even the removal that
// would undo it. So a node is started first (without --bootstrap, --join
// or --peers it waits to be added), then added; --join does both.
func (m *Membership) checkIsThere(ctx context.Context, id, raftAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, addCheckTimeout)
	defer cancel()
	st, err := m.peer(raftAddr, false).NodeStatus(ctx, true)
	if mis := (*clusterapi.CertMismatchError)(nil); errors.As(err, &mis) {
		// Under peer TLS: the node claims id but its certificate names
		// another node.
		return &ConflictError{ID: id, RaftAddr: raftAddr, MemberID: mis.CertID, MemberAddr: raftAddr, NotMember: true}
	}
	if err != nil {
		// %v, not %w: the server passes the Peer's error in the chain on
		// as the leader's own answer (a forwarded change); this is ours.
		return fmt.Errorf("%w: cannot add %s: no node answers at %s (start it first; it waits to be added): %v", fence.ErrUnavailable, id, raftAddr, err)
	}
	if got := st.ID; got != id {
		return &ConflictError{ID: id, RaftAddr: raftAddr, MemberID: got, MemberAddr: raftAddr, NotMember: true}
	}
	// A node that knows a leader other than this one (it leads a cluster
	// of its own, or follows one) is not waiting to be added: raft would
	// make it a voter here and overwrite its log, and the state it
	// acknowledged there would be gone (outside review).
	if la := st.LeaderAddr; la != "" && la != m.node.RaftAddr() {
		return &ConflictError{ID: id, RaftAddr: raftAddr, OtherLeader: la}
	}
	return checkJoinerState(id, raftAddr, st, m.node.ClusterID(), m.node.RaftAddr())
}

// checkJoinerState refuses to add a node (status st) that is neither empty
// nor of this cluster (cluster id ours). A node of another cluster that
// knows no leader — the old nodes after a restore, each started on its old
// data dir — passes the leader check of checkIsThere; made a voter, its
// raft port and this cluster's refuse each other (their cluster ids
// differ), or its log conflicts with this one's: either way a voter that
// never acknowledges, in a cluster of one a quorum that can never commit
// again, not even the removal that would undo it (outside review). So:
//   - its cluster id is this one's: a member of this cluster (removed,
//     added back with its data); raft brings its log in line;
//   - another cluster id: refused (OtherCluster);
//   - no cluster id and raft state (a term, an index): refused (NotEmpty)
//     — an old node restarted without a leader has applied nothing yet,
//     so it cannot say which cluster it was of;
//   - no cluster id and no raft state: an empty data dir waiting to be
//     added.
//
// A leader that has no cluster id yet (elected, not yet in office) cannot
// tell: it refuses a node that has one, for now (ErrUnavailable: retry).
//
// A node with a term but nothing committed or applied that follows this
// leader (its LeaderAddr is ours) has heard only from this leader — raft
// sends only to the servers of its configuration, so it was one a moment
// ago (a removed member restarted empty at its address): it is empty.
func checkJoinerState(id, raftAddr string, st NodeStatus, ours, ourAddr string) error {
	switch {
	case st.ClusterID == "" && st.CommitIndex == 0 && st.AppliedIndex == 0 && st.LeaderAddr != "" && st.LeaderAddr == ourAddr:
		return nil
	case st.ClusterID != "" && st.ClusterID == ours:
		return nil
	case st.ClusterID != "" && ours == "":
		return fmt.Errorf("%w: cannot add %s yet: this leader has no cluster id (not in office yet) to compare %s's (%s) with; retry", fence.ErrUnavailable, id, raftAddr, st.ClusterID)
	case st.ClusterID != "":
		return &ConflictError{ID: id, RaftAddr: raftAddr, OtherCluster: st.ClusterID, ClusterID: ours}
	case st.Term > 0 || st.CommitIndex > 0 || st.AppliedIndex > 0:
		return &ConflictError{ID: id, RaftAddr: raftAddr, NotEmpty: true, Term: st.Term}
	}
	return nil
}

// RemoveMember removes member id, on the leader; it returns once the new
// configuration is committed, and whether id was a member (else nothing
// was removed).
func (m *Membership) RemoveMember(ctx context.Context, forwarded bool, id string) (wasMember bool, err error) {
	if err := ValidateID("id", id); err != nil {
		return false, err
	}
	if m.single() {
		return false, ErrSingleNode
	}
	err = m.onLeader(ctx, forwarded,
		func() error {
			conf, err := m.node.Members(ctx)
			if err != nil {
				return err
			}
			voters, target := 0, false
			for _, c := range conf {
				if c.Voter {
					voters++
					target = target || c.ID == id
				}
			}
			if target && voters == 1 {
				return ErrLastVoter
			}
			wasMember = slices.ContainsFunc(conf, func(c node.Member) bool { return c.ID == id })
			return m.node.RemoveServer(ctx, id)
		},
		func(p Peer) error {
			was, err := p.RemoveMember(ctx, id)
			if err == nil {
				wasMember = was
			}
			return err
		})
	return wasMember, err
}

// TransferLeadership hands leadership from the leader to voter id ("":
// any), and returns the new leader's id when it is known within a moment
// ("" otherwise). Asking for the current leader changes nothing.
func (m *Membership) TransferLeadership(ctx context.Context, forwarded bool, id string) (string, error) {
	if id != "" {
		if err := ValidateID("id", id); err != nil {
			return "", err
		}
	}
	if m.single() {
		return "", ErrSingleNode
	}
	var leader string
	err := m.onLeader(ctx, forwarded,
		func() error {
			if id == m.node.ID() {
				leader = id
				return nil
			}
			if err := m.node.TransferLeadership(ctx, id); err != nil {
				return err
			}
			leader = m.awaitOtherLeader(ctx)
			return nil
		},
		func(p Peer) error {
			l, err := p.TransferLeadership(ctx, id)
			if err == nil {
				leader = l
			}
			return err
		})
	return leader, err
}

// awaitLeader waits (leaderWait at most) until this node knows a leader,
// and returns it ("" if none came): a change asked during an election is
// made once it ends rather than refused.
func (m *Membership) awaitLeader(ctx context.Context) (id, raftAddr string) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, raftAddr = m.node.Leader(); id != "" {
			return id, raftAddr
		}
		select {
		case <-ctx.Done():
			return "", ""
		case <-tick.C:
		}
	}
}

// awaitOtherLeader waits (transferSettle at most) until this node knows a
// leader other than itself, and returns its id, or "".
func (m *Membership) awaitOtherLeader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, transferSettle)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if id, _ := m.node.Leader(); id != "" && id != m.node.ID() {
			return id
		}
		select {
		case <-ctx.Done():
			return ""
		case <-tick.C:
		}
	}
}

// onLeader runs local when this node leads, else remote against the leader
// (marked forwarded). A forwarded call on a node that does not lead is
// refused, never sent on. local's node.ErrNotLeader means nothing was done
// (the node lost leadership just before): the change goes to the new
// leader, if one is known.
func (m *Membership) onLeader(ctx context.Context, forwarded bool, local func() error, remote func(Peer) error) error {
	self := m.node.ID()
	leaderID, leaderAddr := m.node.Leader()
	if leaderID == "" && !forwarded {
		leaderID, leaderAddr = m.awaitLeader(ctx)
	}
	if leaderID == self {
		err := local()
		if !errors.Is(err, node.ErrNotLeader) {
			return err
		}
		if forwarded {
			return fmt.Errorf("%w (%w)", ErrNoHop, err)
		}
		if leaderID, leaderAddr = m.node.Leader(); leaderID == self || leaderAddr == "" {
			return fmt.Errorf("%w (%w)", ErrNoLeader, err)
		}
	}
	if forwarded {
		return ErrNoHop
	}
	if leaderAddr == "" {
		return ErrNoLeader
	}
	return remote(m.peer(leaderAddr, true))
}
