package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// restoredMachine is a machine as a restore builds it: a lease held
// through a request_id, a session holding a lease, a resource written with
// an op_id, a cluster id, and the counter raised to 999 (OpBumpToken 1000).
func restoredMachine(t *testing.T) (m *state.Machine, reqToken uint64, session uint64) {
	t.Helper()
	m = state.NewWithConfig(state.DefaultConfig())
	now := int64(5 * time.Second)
	apply := func(c state.Command) state.Result {
		t.Helper()
		c.Now = now
		r := m.Apply(c)
		if r.Err != nil {
			t.Fatalf("%+v: %v", c, r.Err)
		}
		return r
	}
	apply(state.Command{Op: state.OpConfig, Config: state.DefaultConfig(), ClusterID: "c-1"})
	l := apply(state.Command{Op: state.OpAcquire, Name: "held", Owner: "a", TTL: time.Hour, RequestID: "rid-1"}).Lease
	apply(state.Command{Op: state.OpWrite, Name: "res", Token: l.Token, Value: []byte("v1"), OpID: "op-1"})
	s := apply(state.Command{Op: state.OpSessionOpen, TTL: time.Hour, RequestID: "open-1"}).Session.ID
	apply(state.Command{Op: state.OpAcquire, Name: "sess", Owner: "s", Session: s, Seq: 1})
	apply(state.Command{Op: state.OpBumpToken, Token: 1000})
	return m, uint64(l.Token), s
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// checkRestored checks that n serves m's state: the counter continues
// above the raised floor, the lease, its request_id, the resource and its
// op_id, the session and its lease, and the cluster id are back.
func checkRestored(t *testing.T, n *Node, reqToken, session uint64) {
	t.Helper()
	ctx := context.Background()
	if got := n.LastToken(); got != 999 {
		t.Fatalf("last token %d after the restore, want 999", got)
	}
	if got := grant(t, n, "new"); got != 1000 {
		t.Fatalf("first grant after the restore: token %d, want 1000", got)
	}
	// The request_id's retry is answered with its lease (not a new grant).
	r := mustApply(t, n, state.Command{Op: state.OpAcquire, Name: "held", Owner: "a", TTL: time.Hour, RequestID: "rid-1"})
	if !r.Replayed || uint64(r.Lease.Token) != reqToken {
		t.Fatalf("retry of rid-1: %+v, want its lease %d replayed", r, reqToken)
	}
	rs, err := n.Resource(ctx, "res")
	if err != nil || string(rs.Value) != "v1" || uint64(rs.LastToken) != reqToken {
		t.Fatalf("resource: %+v, %v", rs, err)
	}
	w := mustApply(t, n, state.Command{Op: state.OpWrite, Name: "res", Token: rs.LastToken, Value: []byte("v1"), OpID: "op-1"})
	if !w.Replayed {
		t.Fatalf("op-1 again: %+v, want it replayed (its op_id remembered)", w)
	}
	info, ok, err := n.Session(ctx, session)
	if err != nil || !ok || info.Leases != 1 {
		t.Fatalf("session %d: %+v ok=%v err=%v, want it live with its lease", session, info, ok, err)
	}
	if li, err := n.Lock(ctx, "held"); err != nil || li.Lease == nil || uint64(li.Lease.Token) != reqToken {
		t.Fatalf("lock held: %+v, %v", li, err)
	}
	if id := n.ClusterID(); id != "c-1" {
		t.Fatalf("cluster id %q, want c-1 (kept)", id)
	}
}

// InitDataDir writes a dir a single node opens (no bootstrap) with the
// machine's state; its log continues after the index and term given.
func TestInitDataDirSingleNode(t *testing.T) {
	for _, kind := range []string{LogStoreWAL} {
		t.Run(kind, func(t *testing.T) {
			m, reqToken, s := restoredMachine(t)
			dir := filepath.Join(t.TempDir(), "data")
			if err := InitDataDir(Config{DataDir: dir, LogStore: kind, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, m, 57, 4); err != nil {
				t.Fatal(err)
			}
			n := openNode(t, dir)
			if n.store.Kind != kind {
				t.Fatalf("log store %s, want %s", n.store.Kind, kind)
			}
			checkRestored(t, n, reqToken, s)
			if li, term := n.raft.LastIndex(), n.raft.CurrentTerm(); li <= 57 || term <= 4 {
				t.Fatalf("raft last index %d, term %d: want the log to continue after index 57, term 4", li, term)
			}
			// A restart recovers it as any data dir.
			n.Close()
			n2 := openNode(t, dir)
			if got := n2.LastToken(); got != 1000 {
				t.Fatalf("after a restart: last token %d, want 1000", got)
			}
		})
	}
}

// InitDataDir refuses a dir that holds anything, and leaves it as it was.
func TestInitDataDirRefusesNonEmptyDir(t *testing.T) {
	m, _, _ := restoredMachine(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "something"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := InitDataDir(Config{DataDir: dir}, m, 1, 1)
	if !errors.Is(err, ErrDirNotEmpty) {
		t.Fatalf("InitDataDir of a non-empty dir: %v, want ErrDirNotEmpty", err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{"something"}) {
		t.Fatalf("the dir now holds %v", got)
	}
	// An empty dir that exists is fine.
	empty := t.TempDir()
	if err := InitDataDir(Config{DataDir: empty, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, m, 1, 1); err != nil {
		t.Fatal(err)
	}
}

// A cluster member's dir: its configuration is the one voter at the given
// raft address; the node starts on a mux there without bootstrap or peers,
// leads, and serves the state; a new node joins it and gets the state.
func TestInitDataDirClusterMember(t *testing.T) {
	m, reqToken, s := restoredMachine(t)
	mux, err := raftstore.Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := InitDataDir(Config{DataDir: dir, NodeID: "n1", Peers: []Peer{{ID: "n1", Addr: mux.Addr()}}, Logger: logger}, m, 100, 7); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dir, NodeID: "n1", Mux: mux, Logger: logger}
	testTimeouts(&cfg)
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !n.Ready() || !n.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatalf("the restored member never led: %+v", n.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkRestored(t, n, reqToken, s)

	mux2, err := raftstore.Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mux2.Close()
	cfg2 := Config{DataDir: t.TempDir(), NodeID: "n2", Mux: mux2, Logger: logger}
	testTimeouts(&cfg2)
	n2, err := Open(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if err := n.AddVoter(context.Background(), "n2", mux2.Addr()); err != nil {
		t.Fatal(err)
	}
	for n2.LastToken() != n.LastToken() || n2.ClusterID() != "c-1" {
		if time.Now().After(deadline) {
			t.Fatalf("the joined node has last token %d, cluster id %q; want %d, c-1", n2.LastToken(), n2.ClusterID(), n.LastToken())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A single node's dir started as a cluster member is refused with what to
// do (start it as a single node, or restore it with --raft-addr), not the
// advice for moving a member.
func TestSingleNodeDirStartedAsMemberSaysWhatToDo(t *testing.T) {
	m, _, _ := restoredMachine(t)
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := InitDataDir(Config{DataDir: dir, NodeID: "n1", Logger: logger}, m, 1, 1); err != nil {
		t.Fatal(err)
	}
	mux, err := raftstore.Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	cfg := Config{DataDir: dir, NodeID: "n1", Mux: mux, Logger: logger}
	testTimeouts(&cfg)
	n, err := Open(cfg)
	if err == nil {
		n.Close()
		t.Fatal("a single node's dir started as a cluster member")
	}
	if !strings.Contains(err.Error(), "single node's") || !strings.Contains(err.Error(), "--raft-addr "+mux.Addr()) {
		t.Fatalf("error %q: want it to say the dir is a single node's and to restore with --raft-addr", err)
	}
}
