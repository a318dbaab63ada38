package node

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// machineBytes is the machine's full state as its snapshot encodes it.
func machineBytes(t *testing.T, n *Node) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	n.fsm.read(func(m *state.Machine) { err = m.Snapshot(&buf) })
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// waitSnapshots waits until the node has written at least k snapshots.
func waitSnapshots(t *testing.T, n *Node, k uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // hang guard
	for n.snap.taken.Load() < k {
		if time.Now().After(deadline) {
			t.Fatalf("%d snapshots written, want %d", n.snap.taken.Load(), k)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A node with a small snapshot threshold snapshots and compacts its log;
// reopened, it restores the snapshot (and replays the short tail): the
// whole state is identical and tokens continue. (Kills "Snapshot writes an
// empty state" and "Restore restores nothing".)
func TestSnapshotCompactRestore(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Logger: quietLogger(), SnapshotThreshold: 16, TrailingLogs: 4, WALSegmentSize: 16 << 10}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	var last uint64
	for i := 0; i < 60; i++ {
		name := fmt.Sprintf("lock-%d", i%7)
		cmd := acquire(name, time.Hour)
		cmd.RequestID = fmt.Sprintf("req-%d", i)
		res, err := n.Apply(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if res.Lease == nil {
			continue // busy
		}
		last = uint64(res.Lease.Token)
		mustApply(t, n, state.Command{Op: state.OpWrite, Name: fmt.Sprintf("res-%d", i%5), Token: res.Lease.Token, Value: []byte(fmt.Sprint(i)), OpID: fmt.Sprintf("op-%d", i)})
		mustApply(t, n, state.Command{Op: state.OpAdd, Name: "counter", Token: res.Lease.Token, Delta: int64(i), OpID: fmt.Sprintf("add-%d", i)})
		if i%3 == 0 {
			mustApply(t, n, state.Command{Op: state.OpRelease, Name: name, Token: res.Lease.Token})
		}
	}
	waitSnapshots(t, n, 2)
	first, err := n.log.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= 1 {
		t.Fatalf("log first index %d after snapshots: the log was not compacted", first)
	}
	want := machineBytes(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.fsm.restores.Load() == 0 {
		t.Fatal("reopen did not restore a snapshot")
	}
	if got := machineBytes(t, n); !bytes.Equal(got, want) {
		t.Fatalf("state after snapshot restore differs from the state before close:\n got %s\nwant %s", got, want)
	}
	if n.LastToken() == 0 || uint64(n.LastToken()) < last {
		t.Fatalf("LastToken after restore = %d, want >= %d", n.LastToken(), last)
	}
	next := mustApply(t, n, acquire("fresh", time.Hour)).Lease.Token
	if next != n.LastToken() || uint64(next) <= last {
		t.Fatalf("first grant after restore = %d, want above %d", next, last)
	}
	// The op_id memory came back with the snapshot: a replay is not applied
	// again.
	res := mustApply(t, n, state.Command{Op: state.OpAdd, Name: "counter", Token: 1, Delta: 0, OpID: "add-0"})
	if !res.Replayed {
		t.Fatalf("op_id add-0 replayed after restore = %+v, want Replayed", res)
	}
}

// A log growing by size, with few entries, is snapshotted too
// (Config.SnapshotBytes), so a restart replays a bounded log whatever the
// entry sizes.
func TestSnapshotBySize(t *testing.T) {
	n, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), SnapshotThreshold: 1 << 40, SnapshotBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	tok := mustApply(t, n, acquire("l", time.Hour)).Lease.Token
	value := bytes.Repeat([]byte("x"), 16<<10)
	for i := 0; i < 8; i++ {
		mustApply(t, n, state.Command{Op: state.OpWrite, Name: "big", Token: tok, Value: value})
	}
	waitSnapshots(t, n, 1)
}

// fsm.Snapshot takes a copy and leaves the encoding to Persist: commands
// applied between the two do not reach the snapshot, which holds exactly
// the state at the copy, and a machine restored from it equals that state.
func TestSnapshotCopyEncodedLater(t *testing.T) {
	n := openNode(t, t.TempDir())
	for i := range 20 {
		mustApply(t, n, acquire(fmt.Sprintf("before-%d", i), time.Hour))
	}
	at := machineBytes(t, n)
	snap, err := n.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	for i := range 20 {
		mustApply(t, n, acquire(fmt.Sprintf("after-%d", i), time.Hour))
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || !bytes.Equal(sink.Bytes(), at) {
		t.Fatalf("persisted snapshot (closed %v) differs from the state when it was taken (%d vs %d bytes)", sink.closed, sink.Len(), len(at))
	}
	m := state.New()
	if err := m.Restore(bytes.NewReader(sink.Bytes())); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := m.Snapshot(&again); err != nil || !bytes.Equal(again.Bytes(), at) {
		t.Fatalf("restored snapshot differs (%v)", err)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
