package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/backup"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/memservice"
)

// The handler tests' fakes: an in-memory fence.Service that holds the
// contract (testkit/memservice, checked against a real node by
// testkit/servicetest's TestConformanceInMemory), and fakes of deps.go's
// small interfaces. A server over them starts in microseconds; the few
// tests that need a real node's metrics or membership use newOverNode
// (testnode_test.go).

// The fake node's errors that the handlers tell apart (ErrorKinds): the
// daemon names the node's own (node.ErrNotLeader, node.ErrUnknownOutcome).
var (
	errNotLeader      = errors.New("fake: not the leader")
	errUnknownOutcome = errors.New("fake: outcome unknown")
)

// memNodeID is the fake node's id, in its backups and its membership.
const memNodeID = "mem-node"

// testMems are the in-memory services behind the servers newOverFake built.
var testMems sync.Map // *Server → *memservice.Service

// memOf is the in-memory service behind s.
func memOf(s *Server) *memservice.Service {
	m, _ := testMems.Load(s)
	return m.(*memservice.Service)
}

// applier is what a test applies a raw command through: a real node or
// the in-memory service.
type applier interface {
	Apply(ctx context.Context, cmd state.Command) (state.Result, error)
}

// storeOf is what s serves over, as an applier.
func storeOf(s *Server) applier {
	if m, ok := testMems.Load(s); ok {
		return m.(*memservice.Service)
	}
	return nodeOf(s)
}

// waitersOf is the number of blocking acquires waiting behind s.
func waitersOf(s *Server) int {
	if m, ok := testMems.Load(s); ok {
		return m.(*memservice.Service).Waiters()
	}
	return nodeOf(s).Status().Waiters
}

// newOverFake builds a server over a new in-memory service that records
// rules (zero: state.DefaultConfig()), a fake node (always ready; its
// backup is the service's state) and a fake membership of one node (which
// refuses every change as a single node does); the service closes at
// cleanup.
func newOverFake(tb testing.TB, cfg Config, rules state.Config) (*Server, error) {
	tb.Helper()
	return newOverFakeWith(tb, cfg, rules, nil)
}

// newOverFakeWith is newOverFake with the deps altered by change (if set)
// before the server is built.
func newOverFakeWith(tb testing.TB, cfg Config, rules state.Config, change func(*Deps)) (*Server, error) {
	tb.Helper()
	m := memservice.New(memservice.Config{Rules: rules})
	deps := Deps{
		Service: m, Node: memNode{m}, Cluster: memMembership{m}, Auth: memAuth{m},
		Errors: ErrorKinds{NotLeader: errNotLeader, UnknownOutcome: errUnknownOutcome, Closed: memservice.ErrClosed, ChangeRefused: func(err error) bool { return err == cluster.ErrSingleNode }},
	}
	if change != nil {
		change(&deps)
	}
	s, err := New(cfg, deps)
	if err != nil {
		m.Close()
		return nil, err
	}
	testMems.Store(s, m)
	tb.Cleanup(func() {
		testMems.Delete(s)
		m.Close()
	})
	return s, nil
}

// memAuth is the AuthStore of an in-memory service.
type memAuth struct{ m *memservice.Service }

func (a memAuth) ReadAuth(f func(m *state.Machine)) { a.m.Machine(f) }

func (a memAuth) AuthEnabled() (on bool) {
	a.m.Machine(func(m *state.Machine) { on = m.AuthEnabled() })
	return on
}

// CaughtUp: one copy, always caught up.
func (memAuth) CaughtUp() error { return nil }

func (a memAuth) ApplyAuth(ctx context.Context, cmd state.Command) (state.Result, error) {
	return a.m.Apply(ctx, cmd)
}

// memNode is a fake server.Node over an in-memory service.
type memNode struct{ m *memservice.Service }

func (n memNode) Readiness() (bool, string) {
	return true, fmt.Sprintf("applied=%d last_token=%d", n.m.Applied(), n.m.LastToken())
}

func (n memNode) Limits() fence.Limits { return n.m.Limits() }

// IsLeader: one copy, always the leader.
func (memNode) IsLeader() bool { return true }

// Backup writes the service's state as a backup file (backup.Write), as
// the daemon's adapter writes a node's.
func (n memNode) Backup(ctx context.Context) (*fencev1.BackupHeader, func(io.Writer) error, error) {
	view, applied, last, now := n.m.SnapshotView()
	h := backup.Header{
		ClusterID: n.m.ClusterID(), NodeID: memNodeID, Role: "leader",
		AppliedIndex: applied, Term: 1, LastToken: last,
		ServerTimeNS: now, WallUnixMS: time.Now().UnixMilli(), Version: "test",
	}
	hdr := &fencev1.BackupHeader{
		Format: backup.FormatVersion, ClusterId: h.ClusterID, NodeId: h.NodeID, Role: h.Role,
		AppliedIndex: h.AppliedIndex, Term: h.Term, LastToken: uint64(h.LastToken),
		ServerTime: durationpb.New(time.Duration(h.ServerTimeNS)), WallUnixMs: h.WallUnixMS, Version: h.Version,
	}
	return hdr, func(w io.Writer) error { return backup.Write(w, h, view) }, nil
}

// memMembership is a fake server.Membership: one node that leads, whose
// membership cannot change (cluster.ErrSingleNode).
type memMembership struct{ m *memservice.Service }

func (f memMembership) Members(ctx context.Context) (cluster.MemberList, error) {
	st := f.NodeStatus(false)
	return cluster.MemberList{AnsweredBy: memNodeID, Members: []cluster.Member{
		{ID: memNodeID, Suffrage: cluster.Voter, Leader: true, Status: &st},
	}}, nil
}

func (memMembership) AddMember(context.Context, string, string, bool, string) error {
	return cluster.ErrSingleNode
}

func (memMembership) RemoveMember(context.Context, string) (bool, error) {
	return false, cluster.ErrSingleNode
}

func (memMembership) TransferLeadership(context.Context, string) (string, error) {
	return "", cluster.ErrSingleNode
}

func (f memMembership) NodeStatus(bool) cluster.NodeStatus {
	applied := f.m.Applied()
	return cluster.NodeStatus{
		ID: memNodeID, Role: "leader", LeaderID: memNodeID, Term: 1, CommitIndex: applied, AppliedIndex: applied,
		LastToken: uint64(f.m.LastToken()), Ready: true, ClusterID: f.m.ClusterID(),
		ServerTime: time.Duration(f.m.Now()), Version: "test",
	}
}
