package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// gateLog is a log store whose StoreLogs wait while the gate is shut, so a
// test can make proposals queue behind the groups in flight.
type gateLog struct {
	raft.LogStore
	mu   sync.Mutex
	shut chan struct{} // nil: open
	fail atomic.Bool   // when on, StoreLogs fails (after the gate)
}

func (g *gateLog) close() {
	g.mu.Lock()
	g.shut = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateLog) open() {
	g.mu.Lock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
	g.mu.Unlock()
}

func (g *gateLog) StoreLogs(logs []*raft.Log) error {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut != nil {
		<-shut
	}
	if g.fail.Load() {
		return errDiskFull
	}
	return g.LogStore.StoreLogs(logs)
}

func (g *gateLog) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

func openGated(t *testing.T, dir string, onFatal func(error)) (*Node, *gateLog) {
	t.Helper()
	g := &gateLog{}
	cfg := Config{DataDir: dir, Logger: quietLogger(), OnFatal: onFatal,
		wrapLog: func(s raft.LogStore) raft.LogStore { g.LogStore = s; return g }}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.open(); n.Close() })
	return n, g
}

// untilQueued waits until k commands were proposed since groups0/commands0
// or are queued: every caller has submitted. A hang guard, not a timing
// assertion.
func untilQueued(t *testing.T, n *Node, commands0 uint64, k int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for int(n.props.commands.Load()-commands0)+n.props.queued() < k {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d commands submitted", int(n.props.commands.Load()-commands0)+n.props.queued(), k)
		}
		time.Sleep(time.Millisecond)
	}
}

// logCommands decodes every command entry from index from on, in log
// order, with the number of commands of each entry.
func logCommands(t *testing.T, n *Node, from uint64) (cmds []state.Command, sizes []int) {
	t.Helper()
	last, err := n.log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i <= last; i++ {
		var l raft.Log
		if err := n.log.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cs, err := decodeEntry(l.Data)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		cmds = append(cmds, cs...)
		sizes = append(sizes, len(cs))
	}
	return cmds, sizes
}

// Many concurrent proposers queued behind the groups in flight are written
// as few log entries, and each gets its own result: its own write's value
// and version, in the order the log applied them. Of concurrent acquires of
// one lock, the one first in the log gets it and every other is told that
// one holds it.
func TestGroupEachProposerGetsItsOwnResult(t *testing.T) {
	n, gate := openGated(t, t.TempDir(), nil)
	tok := mustApply(t, n, acquire("writer", time.Hour)).Lease.Token
	from := n.raft.LastIndex() + 1
	groups0, commands0 := n.props.groups.Load(), n.props.commands.Load()

	const writers, acquirers = 40, 20
	gate.close()
	var wg sync.WaitGroup
	writes := make([]state.Result, writers)
	acquires := make([]state.Result, acquirers)
	errs := make(chan error, writers+acquirers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.Apply(context.Background(), state.Command{Op: state.OpWrite, Name: "r", Token: tok, Value: []byte(fmt.Sprintf("v-%d", i))})
			if err == nil {
				err = res.Err
			}
			if err != nil {
				errs <- err
			}
			writes[i] = res
		}()
	}
	for i := range acquirers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.Apply(context.Background(), state.Command{Op: state.OpAcquire, Name: "same", Owner: fmt.Sprintf("o-%d", i), TTL: time.Hour})
			if err != nil {
				errs <- err
			}
			acquires[i] = res
		}()
	}
	untilQueued(t, n, commands0, writers+acquirers)
	gate.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a proposer failed: %v", err)
	}

	groups := n.props.groups.Load() - groups0
	if got := n.props.commands.Load() - commands0; got != writers+acquirers {
		t.Fatalf("%d commands proposed, want %d", got, writers+acquirers)
	}
	// At most groupsInFlight groups were in flight when the gate shut;
	// everything else queued and went as one group.
	if groups > groupsInFlight+1 {
		t.Fatalf("%d commands went as %d log entries, want at most %d", writers+acquirers, groups, groupsInFlight+1)
	}

	// Each writer got its own write back, and the versions follow the log.
	cmds, sizes := logCommands(t, n, from)
	if len(sizes) != int(groups) || slices.Max(sizes) < 2 {
		t.Fatalf("log entries since the gate hold %v commands, want %d entries, one of several commands", sizes, groups)
	}
	version := map[string]uint64{} // value -> version by log order
	var firstOwner string
	var v uint64 = 0
	for _, c := range cmds {
		switch {
		case c.Op == state.OpWrite:
			v++
			version[string(c.Value)] = v
		case c.Op == state.OpAcquire && c.Name == "same" && firstOwner == "":
			firstOwner = c.Owner
		}
	}
	for i, res := range writes {
		want := fmt.Sprintf("v-%d", i)
		if res.Resource == nil || string(res.Resource.Value) != want || res.Resource.Version != version[want] {
			t.Fatalf("writer %d got %+v, want its own value %q at log version %d", i, res.Resource, want, version[want])
		}
	}
	var winner fence.Token
	for i, res := range acquires {
		if fmt.Sprintf("o-%d", i) == firstOwner {
			if res.Err != nil || res.Lease == nil {
				t.Fatalf("first acquire in the log (%s) got %+v, want the lease", firstOwner, res)
			}
			winner = res.Lease.Token
		}
	}
	for i, res := range acquires {
		if fmt.Sprintf("o-%d", i) == firstOwner {
			continue
		}
		var busy *fence.BusyError
		if !errors.As(res.Err, &busy) || busy.Holder != firstOwner || busy.Token != winner {
			t.Fatalf("acquire o-%d after %s got %+v, want BUSY held by token %d", i, firstOwner, res, winner)
		}
	}
}

// When a log write fails, every command of the groups in flight or queued
// is answered with an error (unknown outcome, closed, or not leader: raft
// steps down), none is told it was applied, none hangs.
func TestGroupFailureAnswersEveryCommand(t *testing.T) {
	var fatals atomic.Int32
	n, gate := openGated(t, t.TempDir(), func(error) { fatals.Add(1) })
	commands0 := n.props.commands.Load()
	gate.close()
	const k = 30
	errs := make(chan error, k)
	for i := range k {
		go func() {
			_, err := n.Apply(context.Background(), state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("l-%d", i), Owner: "o", TTL: time.Hour})
			errs <- err
		}()
	}
	untilQueued(t, n, commands0, k)
	gate.fail.Store(true)
	gate.open()
	for range k {
		err := <-errs
		if !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotLeader) {
			t.Fatalf("a command queued behind a failed write got %v, want ErrUnknownOutcome, ErrClosed or ErrNotLeader", err)
		}
	}
	if fatals.Load() != 1 {
		t.Fatalf("OnFatal called %d times, want 1", fatals.Load())
	}
}

// A proposal still queued when its context ends is withdrawn: it returns
// ctx.Err() and is never proposed.
func TestGroupQueuedProposalWithdrawn(t *testing.T) {
	n, gate := openGated(t, t.TempDir(), nil)
	from := n.raft.LastIndex() + 1
	commands0 := n.props.commands.Load()
	gate.close()
	// Fill the groups in flight.
	var wg sync.WaitGroup
	for i := range groupsInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mustApply(t, n, acquire(fmt.Sprintf("front-%d", i), time.Hour))
		}()
	}
	untilQueued(t, n, commands0, groupsInFlight)
	for n.props.commands.Load()-commands0 < groupsInFlight {
		time.Sleep(time.Millisecond) // both are in groups, not queued
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := n.Apply(ctx, acquire("withdrawn", time.Hour))
		done <- err
	}()
	untilQueued(t, n, commands0, groupsInFlight+1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued proposal whose context ended = %v, want context.Canceled", err)
	}
	gate.open()
	wg.Wait()
	mustApply(t, n, acquire("after", time.Hour))
	cmds, _ := logCommands(t, n, from)
	for _, c := range cmds {
		if c.Name == "withdrawn" {
			t.Fatal("a withdrawn proposal was proposed")
		}
	}
}

// A restart replays group entries (and a log with single-command entries
// before them) to the same state: same last token, same snapshot.
func TestGroupEntriesReplayToTheSameState(t *testing.T) {
	dir := t.TempDir()
	n, gate := openGated(t, dir, nil)
	// A single-command entry, as written before groups existed.
	old := state.Command{Op: state.OpAcquire, Name: "old", Owner: "o", TTL: time.Hour}
	if c, _ := n.Now(); c > 0 {
		old.Now = c
	}
	data, err := old.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.raft.Apply(data, 0).Error(); err != nil {
		t.Fatal(err)
	}
	commands0 := n.props.commands.Load()
	gate.close()
	var wg sync.WaitGroup
	const k = 50
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := acquire(fmt.Sprintf("l-%d", i%10), time.Hour) // 10 granted, the rest busy
			cmd.OpID = fmt.Sprintf("op-%d", i)
			if _, err := n.Apply(context.Background(), cmd); err != nil {
				t.Error(err)
			}
		}()
	}
	untilQueued(t, n, commands0, k)
	gate.open()
	wg.Wait()
	cmds, sizes := logCommands(t, n, 1)
	if slices.Max(sizes) < 2 || !slices.ContainsFunc(cmds, func(c state.Command) bool { return c.Name == "old" }) {
		t.Fatalf("log holds entries of %v commands; want a group and the single-command entry", sizes)
	}
	before, tokBefore := machineBytes(t, n), n.LastToken()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openNode(t, dir)
	if r := n.fsm.restores.Load(); r != 0 {
		t.Fatalf("%d snapshots restored: the test must replay the log", r)
	}
	after, tokAfter := machineBytes(t, n), n.LastToken()
	if tokAfter != tokBefore || !bytes.Equal(before, after) {
		t.Fatalf("after replay: last token %d (was %d), state equal: %v", tokAfter, tokBefore, bytes.Equal(before, after))
	}
}

// The group codec round-trips and refuses every malformed entry without
// panicking: no marker, a zero count, a command carrying its own stamp,
// truncation at every length, trailing bytes.
func TestGroupCodec(t *testing.T) {
	cmds := []state.Command{
		{Op: state.OpAcquire, Name: "a", Owner: "o", TTL: time.Second, RequestID: "r"},
		{Op: state.OpWrite, Name: "res", Token: 3, Value: []byte("v")},
		{Op: state.OpTick},
	}
	enc := func(now int64, slack time.Duration, cs []state.Command) []byte {
		b := appendGroupHeader(nil, now, slack, len(cs))
		for _, c := range cs {
			d, err := c.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b = appendGroupCommand(b, d)
		}
		return b
	}
	good := enc(12345, 7, cmds)
	got, err := decodeGroup(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		want := cmds[i]
		want.Now, want.Slack = 12345, 7
		if fmt.Sprintf("%+v", got[i]) != fmt.Sprintf("%+v", want) {
			t.Fatalf("command %d = %+v, want %+v", i, got[i], want)
		}
	}
	for l := 0; l < len(good); l++ {
		if _, err := decodeGroup(good[:l], nil); err == nil {
			t.Fatalf("a group truncated to %d of %d bytes decoded", l, len(good))
		}
	}
	stamped := cmds[0]
	stamped.Now = 1
	bad := map[string][]byte{
		"trailing":     append(slices.Clone(good), 0),
		"zero count":   appendGroupHeader(nil, 1, 0, 0),
		"own stamp":    enc(1, 0, []state.Command{stamped}),
		"no marker":    good[1:],
		"count lies":   appendGroupHeader(nil, 1, 0, 1<<40),
		"single entry": func() []byte { d, _ := cmds[0].MarshalBinary(); return d }(),
	}
	for name, b := range bad {
		if _, err := decodeGroup(b, nil); err == nil || !errors.Is(err, errBadGroup) && !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("%s: decodeGroup = %v, want a malformed-group error", name, err)
		}
	}
	// decodeEntry reads both kinds.
	if cs, err := decodeEntry(bad["single entry"]); err != nil || len(cs) != 1 || cs[0].Name != "a" {
		t.Fatalf("decodeEntry(single command) = %+v, %v", cs, err)
	}
}

// FuzzDecodeGroup: decoding never panics, and what decodes re-encodes to
// the same bytes (one encoding per group: R1).
func FuzzDecodeGroup(f *testing.F) {
	d, _ := state.Command{Op: state.OpAcquire, Name: "a", Owner: "o", TTL: time.Second}.MarshalBinary()
	f.Add(appendGroupCommand(appendGroupHeader(nil, 5, 1, 1), d))
	f.Add([]byte{groupMarker, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := decodeGroup(b, nil)
		if err != nil {
			return
		}
		re := appendGroupHeader(nil, cmds[0].Now, cmds[0].Slack, len(cmds))
		for _, c := range cmds {
			c.Now, c.Slack = 0, 0
			d, err := c.MarshalBinary()
			if err != nil {
				t.Fatalf("decoded command does not encode: %v", err)
			}
			re = appendGroupCommand(re, d)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("%x decodes and re-encodes as %x", b, re)
		}
	})
}

// A proposal still queued when the node closes is answered ErrClosed at
// once (nothing proposed), even while the group in flight is stuck in a
// log write.
func TestGroupQueuedProposalClosed(t *testing.T) {
	n, gate := openGated(t, t.TempDir(), nil)
	commands0 := n.props.commands.Load()
	gate.close()
	front := applyAsync(n, context.Background(), acquire("front", time.Hour))
	untilQueued(t, n, commands0, 1)
	for n.props.commands.Load() == commands0 {
		time.Sleep(time.Millisecond) // front is in its group, stuck in the write
	}
	queued := applyAsync(n, context.Background(), acquire("queued", time.Hour))
	untilQueued(t, n, commands0, 2)
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	if a := recv(t, queued); !errors.Is(a.err, ErrClosed) {
		t.Fatalf("proposal queued at Close = %+v, %v; want ErrClosed", a.res, a.err)
	}
	gate.open()
	recv(t, front) // answered one way or another
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// The snapshot trigger counts commands, not log entries: a restart replays
// every command of a group, so SnapshotThreshold commands written in a few
// group entries are due for a snapshot.
func TestSnapshotThresholdCountsGroupedCommands(t *testing.T) {
	g := &gateLog{}
	n, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), SnapshotThreshold: 32,
		wrapLog: func(s raft.LogStore) raft.LogStore { g.LogStore = s; return g }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.open(); n.Close() })
	taken, groups0, commands0 := n.snap.taken.Load(), n.props.groups.Load(), n.props.commands.Load()
	g.close()
	const k = 40
	var wg sync.WaitGroup
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mustApply(t, n, acquire(fmt.Sprintf("l-%d", i), time.Hour))
		}()
	}
	untilQueued(t, n, commands0, k)
	g.open()
	wg.Wait()
	if groups := n.props.groups.Load() - groups0; groups >= 32 {
		t.Fatalf("%d commands went as %d entries: the test needs fewer entries than the threshold", k, groups)
	}
	waitSnapshots(t, n, taken+1)
}
