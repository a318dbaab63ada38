package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/state"
)

// logChange is one change as replaying the log gives it: the independent
// record a watch is checked against.
type logChange struct {
	pos WatchPos
	c   state.Change
}

// replayLog applies n's whole log (it must start at index 1: no snapshot)
// to a fresh machine and returns every change with its position, and, for
// each index in at, the locks under prefix after that entry (by name:
// token and waiters).
func replayLog(t *testing.T, n *Node, prefix string, at map[uint64]bool) ([]logChange, map[uint64]string) {
	t.Helper()
	first, err := n.store.Log.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := n.store.Log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first > 1 {
		t.Fatalf("the log starts at %d: a snapshot compacted it", first)
	}
	m := state.New()
	var out []logChange
	states := map[uint64]string{}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := n.store.Log.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogCommand {
			var cmds []state.Command
			if isGroup(l.Data) {
				if cmds, err = decodeGroup(l.Data, nil); err != nil {
					t.Fatal(err)
				}
			} else {
				var c state.Command
				if err := c.UnmarshalBinary(l.Data); err != nil {
					t.Fatal(err)
				}
				cmds = []state.Command{c}
			}
			for j, c := range cmds {
				res := m.Apply(c)
				for k, ch := range res.Changes {
					out = append(out, logChange{WatchPos{i, uint32(j), uint32(k)}, ch})
				}
			}
		}
		if at[i] {
			held, _ := m.LocksHeldPage(prefix, "", 0, m.Now()) // as a watch reads it: leases whose end is not applied yet still listed
			states[i] = describeLocks(held)
		}
	}
	return out, states
}

func describeLocks(ls []state.LockInfo) string {
	s := ""
	for _, l := range ls {
		tok := uint64(0)
		if l.Lease != nil {
			tok = uint64(l.Lease.Token)
		}
		s += fmt.Sprintf("%s=%d/%d ", l.Name, tok, l.Waiters)
	}
	return s
}

// watchUntil collects w's events until a grant of lock end.
func watchUntil(ctx context.Context, w *Watch, end string) (start *WatchEvent, got []WatchEvent, err error) {
	var buf []WatchEvent
	for {
		buf, err = w.Next(ctx, buf)
		if err != nil {
			return start, got, err
		}
		for _, e := range buf {
			if e.State != nil {
				if start != nil {
					return start, got, errors.New("a second state")
				}
				e := e
				start = &e
				continue
			}
			got = append(got, e)
			if e.Change.Name == end && e.Change.Kind == state.ChangeGranted {
				return start, got, nil
			}
		}
	}
}

// 1,000 watchers of one prefix, started at random moments of a churn of
// acquires (some waiting), releases and expiries on names in and out of
// the prefix, each receive the state at their start and then every change
// of the prefix in log order, with no gap and no duplicate: exactly what
// replaying the log gives after their start position, and the state the
// replay has there.
func TestWatchThousandWatchersFollowTheLog(t *testing.T) {
	n, err := Open(Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WatchHistory: 1 << 17})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { within(t, "close", func() { n.Close() }) })
	const watchers, workers, rounds = 1000, 8, 40
	const prefix, end = "p/", "p/end"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type result struct {
		start *WatchEvent
		got   []WatchEvent
		err   error
	}
	results := make([]result, watchers)
	var wwg sync.WaitGroup
	startC := make(chan int, watchers)
	for i := range watchers {
		startC <- i
	}
	close(startC)
	// Watchers start while the churn runs: a few goroutines start them
	// one by one, each then followed on a goroutine of its own.
	churned := make(chan struct{})
	base := n.fsm.applied.Load()
	var swg sync.WaitGroup
	for range 4 {
		swg.Add(1)
		go func() {
			defer swg.Done()
			for i := range startC {
				// Watcher i starts once the log has moved i/4 entries
				// (or the churn is over).
				for {
					applied, next := n.fsm.appliedWait()
					if applied >= base+uint64(i/4) {
						break
					}
					select {
					case <-next:
						continue
					case <-churned:
					}
					break
				}
				w, err := n.Watch(ctx, WatchRequest{Prefix: prefix})
				if err != nil {
					results[i].err = err
					continue
				}
				wwg.Add(1)
				go func() {
					defer wwg.Done()
					defer w.Close()
					r := &results[i]
					r.start, r.got, r.err = watchUntil(ctx, w, end)
				}()
			}
		}()
	}
	var cwg sync.WaitGroup
	for k := range workers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			for r := range rounds {
				name := fmt.Sprintf("p/%d", rng.IntN(4))
				if r%5 == 4 {
					name = fmt.Sprintf("q/%d", rng.IntN(2)) // outside the prefix
				}
				cmd := acquire(name, time.Hour)
				if r%9 == 8 {
					cmd.TTL = 20 * time.Millisecond // not released: it expires
				}
				cmd.Wait = time.Hour
				if r%7 == 3 {
					cmd.Wait = 0 // a try: may be refused busy
				}
				res, err := n.Apply(ctx, cmd)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Err != nil || res.Lease == nil {
					continue
				}
				if r%9 == 8 {
					continue // left to expire
				}
				if _, err := n.Apply(ctx, state.Command{Op: state.OpRelease, Name: name, Token: res.Lease.Token}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	cwg.Wait()
	close(churned)
	swg.Wait()
	mustApply(t, n, acquire(end, time.Hour))
	wwg.Wait()

	at := map[uint64]bool{}
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("watcher %d: %v", i, r.err)
		}
		if r.start == nil {
			t.Fatalf("watcher %d: no state first", i)
		}
		at[r.start.Pos.Index] = true
	}
	log, states := replayLog(t, n, prefix, at)
	var inPrefix []logChange
	for _, c := range log {
		if len(c.c.Name) >= 2 && c.c.Name[:2] == prefix {
			inPrefix = append(inPrefix, c)
		}
	}
	if len(at) < 50 {
		t.Fatalf("the watchers started at %d positions only", len(at))
	}
	for i, r := range results {
		if got, want := describeLocks(r.start.State.Locks), states[r.start.Pos.Index]; got != want {
			t.Fatalf("watcher %d: state at %s is %q; the log's there is %q", i, r.start.Pos, got, want)
		}
		var want []logChange
		for _, c := range inPrefix {
			if r.start.Pos.Less(c.pos) {
				want = append(want, c)
				if c.c.Name == end && c.c.Kind == state.ChangeGranted {
					break // the watcher stopped there
				}
			}
		}
		if len(r.got) != len(want) {
			t.Fatalf("watcher %d (from %s): %d changes; the log has %d after its start", i, r.start.Pos, len(r.got), len(want))
		}
		for j := range want {
			if r.got[j].Pos != want[j].pos || r.got[j].Change != want[j].c {
				t.Fatalf("watcher %d: change %d is %s %+v; the log's is %s %+v", i, j, r.got[j].Pos, r.got[j].Change, want[j].pos, want[j].c)
			}
		}
	}
	if len(inPrefix) < workers*rounds {
		t.Fatalf("only %d changes in the prefix: too little churn", len(inPrefix))
	}
	t.Logf("%d watchers, %d changes in the prefix, %d in the log", watchers, len(inPrefix), len(log))
}

func openWatchNode(t *testing.T, dir string, history int) *Node {
	t.Helper()
	n, err := Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), WatchHistory: history})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { within(t, "close", func() { n.Close() }) })
	return n
}

// next reads w's next events (they are there: applied before).
func nextEvents(t *testing.T, w *Watch) []WatchEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs, err := w.Next(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A watch resumed after its last position gets every later change, none
// twice; one resumed from a position the ring no longer holds is told the
// history is gone and gets the current state; a watcher that stops
// reading while the ring moves past it is cut, and the grants went on.
func TestWatchResumeAndHistoryGone(t *testing.T) {
	n := openWatchNode(t, t.TempDir(), 8)
	ctx := context.Background()
	w, err := n.Watch(ctx, WatchRequest{Prefix: "r/"})
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := n.Watch(ctx, WatchRequest{Prefix: "r/"}) // never read after its state
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	if evs := nextEvents(t, stuck); len(evs) != 1 || evs[0].State == nil {
		t.Fatalf("first events %+v; want the state", evs)
	}
	if evs := nextEvents(t, w); len(evs) != 1 || evs[0].State == nil || len(evs[0].State.Locks) != 0 || evs[0].State.HistoryGone {
		t.Fatalf("first events %+v; want an empty state", evs)
	}
	t1 := mustApply(t, n, acquire("r/1", time.Hour)).Lease.Token
	evs := nextEvents(t, w)
	if len(evs) != 1 || evs[0].Change.Kind != state.ChangeGranted || evs[0].Change.Token != t1 {
		t.Fatalf("events %+v; want r/1 granted token %d", evs, t1)
	}
	last := evs[0].Pos
	w.Close()

	// Two changes while away: the resume gets both, from last on.
	mustApply(t, n, state.Command{Op: state.OpRelease, Name: "r/1", Token: t1})
	t2 := mustApply(t, n, acquire("r/2", time.Hour)).Lease.Token
	w, err = n.Watch(ctx, WatchRequest{Prefix: "r/", After: &last})
	if err != nil {
		t.Fatal(err)
	}
	var got []WatchEvent
	for len(got) < 2 {
		got = append(got, nextEvents(t, w)...)
	}
	if len(got) != 2 || got[0].State != nil || got[0].Change.Kind != state.ChangeReleased || got[0].Change.Token != t1 ||
		got[1].Change.Kind != state.ChangeGranted || got[1].Change.Token != t2 || !last.Less(got[0].Pos) || !got[0].Pos.Less(got[1].Pos) {
		t.Fatalf("resumed events %+v; want r/1 released, r/2 granted, after %s", got, last)
	}
	w.Close()

	// Twenty grants: the ring of 8 no longer holds what follows last.
	for i := range 20 {
		mustApply(t, n, acquire(fmt.Sprintf("r/x%d", i), time.Hour))
	}
	w, err = n.Watch(ctx, WatchRequest{Prefix: "r/", After: &last})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	evs = nextEvents(t, w)
	if len(evs) != 1 || evs[0].State == nil || !evs[0].State.HistoryGone || len(evs[0].State.Locks) != 21 {
		t.Fatalf("resume from %s past the ring: %+v; want the state (21 locks) with HistoryGone", last, evs)
	}
	// The watcher that read nothing was cut.
	if _, err := stuck.Next(ctx, nil); !errors.Is(err, ErrWatchBehind) {
		t.Fatalf("stuck watcher: %v; want ErrWatchBehind", err)
	}
	if n.Watchers() != 2 {
		t.Fatalf("Watchers() = %d; want 2 (w and stuck)", n.Watchers())
	}
}

// A watch on a follower of a 3-node cluster sees the leader's changes with
// the same positions as a watch on the leader, and one started on the
// leader resumes on a follower after its last position.
func TestWatchThroughAFollower(t *testing.T) {
	tc := startCluster(t, clusterOpts{n: 3})
	lead := tc.leader()
	f := tc.others(lead)[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	wl, err := lead.node.Watch(ctx, WatchRequest{Prefix: "c/"})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	wf, err := f.node.Watch(ctx, WatchRequest{Prefix: "c/"})
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	tok := grant(t, lead.node, "c/a")
	collect := func(w *Watch, n int) []WatchEvent {
		var out []WatchEvent
		for len(out) < n {
			evs, err := w.Next(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.State == nil {
					out = append(out, e)
				}
			}
		}
		return out
	}
	gl, gf := collect(wl, 1), collect(wf, 1)
	if gl[0].Pos != gf[0].Pos || gf[0].Change != gl[0].Change || gf[0].Change.Token != tok {
		t.Fatalf("leader saw %+v, follower %+v; want the same grant of token %d at the same position", gl[0], gf[0], tok)
	}
	// Resume on the follower after the leader's last position.
	last := gl[0].Pos
	if _, err := lead.node.Apply(ctx, state.Command{Op: state.OpRelease, Name: "c/a", Token: tok}); err != nil {
		t.Fatal(err)
	}
	wr, err := tc.others(lead)[1].node.Watch(ctx, WatchRequest{Prefix: "c/", After: &last})
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Close()
	evs, err := wr.Next(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].State != nil || evs[0].Change.Kind != state.ChangeReleased || evs[0].Change.Token != tok {
		t.Fatalf("resumed on the other follower after %s: %+v; want the release only", last, evs)
	}
}

// After a restart the node replays its log from its last snapshot: a
// resume from after the snapshot gets the changes (replayed into the
// ring), one from before it is told the history is gone and gets the
// state.
func TestWatchHistoryAfterARestart(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	w, err := n.Watch(ctx, WatchRequest{Prefix: "h/"})
	if err != nil {
		t.Fatal(err)
	}
	nextEvents(t, w) // the state
	t1 := mustApply(t, n, acquire("h/1", time.Hour)).Lease.Token
	before := nextEvents(t, w)[0].Pos
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	t2 := mustApply(t, n, acquire("h/2", time.Hour)).Lease.Token
	after := nextEvents(t, w)[0].Pos
	t3 := mustApply(t, n, acquire("h/3", time.Hour)).Lease.Token
	w.Close()
	within(t, "close", func() { n.Close() })

	n = openWatchNode(t, dir, 0)
	w, err = n.Watch(ctx, WatchRequest{Prefix: "h/", After: &after})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if evs := nextEvents(t, w); len(evs) != 1 || evs[0].State != nil || evs[0].Change.Token != t3 {
		t.Fatalf("resume after %s (after the snapshot) on the restarted node: %+v; want h/3's grant (token %d)", after, evs, t3)
	}
	w2, err := n.Watch(ctx, WatchRequest{Prefix: "h/", After: &before})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	evs := nextEvents(t, w2)
	if len(evs) != 1 || evs[0].State == nil || !evs[0].State.HistoryGone || len(evs[0].State.Locks) != 3 {
		t.Fatalf("resume after %s (before the snapshot) on the restarted node: %+v; want the state (h/1..3: tokens %d %d %d) with HistoryGone", before, evs, t1, t2, t3)
	}
}

// A resume from a position past this node's log — one a restore left
// behind (the restored log is numbered from an older index), or a made-up
// one — starts from the state with HistoryGone, not silently: an outside
// test resumed after a restore and was sent nothing at all.
func TestWatchResumeFromAnotherHistory(t *testing.T) {
	n := openWatchNode(t, t.TempDir(), 64)
	ctx := context.Background()
	mustApply(t, n, acquire("h/1", time.Hour))
	future := WatchPos{Index: 1 << 40, Cmd: 0, Change: 0}
	w, err := n.Watch(ctx, WatchRequest{Prefix: "h/", After: &future})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	evs := nextEvents(t, w)
	if len(evs) != 1 || evs[0].State == nil || !evs[0].State.HistoryGone || len(evs[0].State.Locks) != 1 {
		t.Fatalf("resume from %s: %+v; want the state (h/1) with HistoryGone", future, evs)
	}
}
