package node

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// fsm adapts a state.Machine to raft.BatchingFSM.
//
// Contract: raft calls ApplyBatch, Apply, Snapshot and Restore from its one
// FSM goroutine, never concurrently with each other; readers (the node's read
// methods, the clock and the ticker) may run at any time and take mu for
// reading. After every batch the fsm publishes its applied index, dispatches
// the batch's Events to waiters, and kicks the ticker.
type fsm struct {
	mu sync.RWMutex
	m  *state.Machine
	// at is the raft index and term of the last entry applied to m, set
	// under mu with the state (applied is published after mu is released);
	// zero after a snapshot restore until the next batch (BackupView).
	at struct{ index, term uint64 }

	applied  atomic.Uint64 // last log index applied (or known applied)
	appliedC chan struct{} // closed and replaced when applied advances; guarded by amu
	amu      sync.Mutex

	waiters *waiters
	kick    chan struct{}                // cap 1: wakes the ticker
	rulesC  chan struct{}                // cap 1: an OpConfig was applied, or a snapshot restored (watchRules)
	limits  atomic.Pointer[fence.Limits] // the recorded rules' request bounds, set under mu with every change (Node.Limits)
	authOn  atomic.Bool                  // the state's auth checking is on, set under mu after every batch and restore (Node.AuthEnabled)
	keyed   atomic.Bool                  // the state has a signing key, set under mu after every batch and restore (Node.Ready)
	onBatch atomic.Pointer[func(n int)]  // metrics hook (nil: none); set at any time
	// onChanges: the changes hook (Node.OnChanges; nil: none); set at any time
	onChanges atomic.Pointer[func(index uint64, cs []state.Change)]
	// replayTo: the last index the node's log held when it opened; the
	// changes of entries up to it are a replay of the node's own log
	// tail at start, not handed to onChanges (changehook.go)
	replayTo atomic.Uint64
	// appliedAt: a monotonic reading taken when the state last changed
	// (a batch applied, a snapshot restored), under mu (ReadStateAt)
	appliedAt time.Time

	restores   atomic.Uint64 // snapshots restored
	firstBatch atomic.Int64  // unix nanoseconds of the first batch with entries applied (Node.logReplay)
	logger     *slog.Logger  // restores are logged (start, end, size, duration); nil: slog.Default
	nearCap    atomic.Bool   // an id memory is at least idNearCap of its cap (set after every batch and restore)
	counts     counters      // state events applied (counters.go)

	cmds []state.Command // decoding buffer of group entries (FSM goroutine only)

	hub     *watchHub    // recent changes for watchers (watch.go)
	changed []cmdChanges // the batch's changes, for hub (FSM goroutine only)
}

// cmdChanges are the changes of the command at place cmd of entry index.
type cmdChanges struct {
	index uint64
	cmd   int
	cs    []state.Change
}

var _ raft.BatchingFSM = (*fsm)(nil)

// setLimits publishes the request bounds of the rules c (under mu).
func (f *fsm) setLimits(c state.Config) {
	l := c.Limits()
	f.limits.Store(&l)
}

func newFSM(m *state.Machine, w *waiters, history int) *fsm {
	f := &fsm{m: m, waiters: w, hub: newWatchHub(history), kick: make(chan struct{}, 1), rulesC: make(chan struct{}, 1), appliedC: make(chan struct{})}
	f.setLimits(m.Config())
	f.authOn.Store(m.AuthEnabled())
	f.keyed.Store(m.HasSigningKey())
	return f
}

// ApplyBatch applies committed entries in order under one write lock. An
// entry is one command (written before group commit) or a group of
// commands (groupcodec.go), applied in order. Each response is a
// state.Result (one command), a *groupResults (a group, in its order), an
// error (an undecodable entry: it changes nothing), or nil (a
// configuration entry).
func (f *fsm) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	var events []state.Event
	rules := false
	f.mu.Lock()
	rel0, exp0 := f.m.LeaseEnds()
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		if isGroup(l.Data) {
			cmds, err := decodeGroup(l.Data, f.cmds)
			if err != nil {
				out[i] = fmt.Errorf("node: undecodable group at index %d: %w", l.Index, err)
				continue
			}
			gr := getGroupResults(len(cmds))
			rs := gr.rs
			for j := range cmds {
				rules = rules || cmds[j].Op == state.OpConfig
				rs[j] = f.m.Apply(cmds[j])
				f.counts.result(cmds[j].Op, &rs[j])
				if len(rs[j].Changes) > 0 {
					f.changed = append(f.changed, cmdChanges{l.Index, j, rs[j].Changes})
				}
				events = append(events, rs[j].Events...)
			}
			out[i] = gr
			clear(cmds) // keep no command's data alive
			f.cmds = cmds[:0]
			continue
		}
		var cmd state.Command
		if err := cmd.UnmarshalBinary(l.Data); err != nil {
			out[i] = fmt.Errorf("node: undecodable command at index %d: %w", l.Index, err)
			continue
		}
		rules = rules || cmd.Op == state.OpConfig
		res := f.m.Apply(cmd)
		f.counts.result(cmd.Op, &res)
		if len(res.Changes) > 0 {
			f.changed = append(f.changed, cmdChanges{l.Index, 0, res.Changes})
		}
		events = append(events, res.Events...)
		out[i] = res
	}
	if len(logs) > 0 {
		f.appliedAt = time.Now()
		if f.firstBatch.Load() == 0 {
			f.firstBatch.Store(f.appliedAt.UnixNano())
		}
	}
	rel1, exp1 := f.m.LeaseEnds()
	f.counts.leaseEnds(rel0, exp0, rel1, exp1)
	f.watchIDFill()
	f.authOn.Store(f.m.AuthEnabled())
	f.keyed.Store(f.m.HasSigningKey())
	if rules {
		f.setLimits(f.m.Config())
	}
	if len(logs) > 0 {
		f.at.index, f.at.term = logs[len(logs)-1].Index, logs[len(logs)-1].Term
		// The watch hub, under its short lock, still under mu: a watch
		// that reads the state under mu starts exactly where the
		// changes it then reads begin (watch.go).
		f.hub.mu.Lock()
		for _, c := range f.changed {
			f.hub.add(c.index, c.cmd, c.cs)
		}
		f.hub.applied(logs[0].Index, logs[len(logs)-1].Index)
		f.hub.mu.Unlock()
	}
	f.mu.Unlock()
	if fn := f.onChanges.Load(); fn != nil {
		replayTo := f.replayTo.Load()
		for _, c := range f.changed {
			if c.index > replayTo {
				(*fn)(c.index, c.cs)
			}
		}
	}
	clear(f.changed)
	f.changed = f.changed[:0]
	if len(logs) > 0 {
		f.advance(logs[len(logs)-1].Index)
	}
	f.waiters.deliverAll(events)
	select {
	case f.kick <- struct{}{}:
	default:
	}
	if rules {
		f.signalRules()
	}
	if fn := f.onBatch.Load(); fn != nil {
		(*fn)(len(logs))
	}
	return out
}

// groupResults are a group's results in its order: the FSM's response to
// a group entry. Pooled: the commit loop that proposed the group returns
// them once it has answered every proposal (Node.answer); a follower's are
// dropped by raft and collected.
type groupResults struct{ rs []state.Result }

var groupResultsPool = sync.Pool{New: func() any { return new(groupResults) }}

// getGroupResults returns pooled results of length n, zeroed.
func getGroupResults(n int) *groupResults {
	r := groupResultsPool.Get().(*groupResults)
	if cap(r.rs) < n {
		r.rs = make([]state.Result, n)
	}
	r.rs = r.rs[:n]
	return r
}

// putGroupResults clears r (no result stays reachable) and pools it.
func putGroupResults(r *groupResults) {
	clear(r.rs)
	if cap(r.rs) > maxGroupCommands {
		r.rs = nil
	}
	r.rs = r.rs[:0]
	groupResultsPool.Put(r)
}

// Apply applies one entry (raft uses ApplyBatch; this completes raft.FSM).
func (f *fsm) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// advance records that everything up to index has been applied.
func (f *fsm) advance(index uint64) {
	f.amu.Lock()
	if index > f.applied.Load() {
		f.applied.Store(index)
		close(f.appliedC)
		f.appliedC = make(chan struct{})
	}
	f.amu.Unlock()
}

// appliedWait returns the applied index and a channel closed when it next
// advances.
func (f *fsm) appliedWait() (uint64, <-chan struct{}) {
	f.amu.Lock()
	defer f.amu.Unlock()
	return f.applied.Load(), f.appliedC
}

// Snapshot copies the state (state.Machine.SnapshotView: plain copies, no
// encoding) under the read lock; raft encodes and writes the copy in
// Persist, on its snapshot goroutine, while applies go on. Only the copy,
// O(state), holds up applies (raft calls Snapshot on its FSM goroutine).
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	v := f.m.SnapshotView()
	f.mu.RUnlock()
	return &fsmSnapshot{view: v}, nil
}

// Restore replaces the state with a snapshot. It logs when it starts and
// when it ends, with the snapshot's size and how long it took: a restore of
// a large state takes seconds, and a restart was seen going from 0.8 s to
// 5.7 s with nothing in the log to say why.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	log := f.log()
	start := time.Now()
	log.Info("restoring snapshot")
	r := &countingReader{r: rc}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.m.Restore(r); err != nil {
		log.Error("snapshot restore failed", "bytes", r.n, "took", time.Since(start), "err", err)
		return fmt.Errorf("node: restore: %w", err)
	}
	f.appliedAt = time.Now()
	f.watchIDFill()
	ids := f.m.IDMemory()
	log.Info("snapshot restored", "bytes", r.n, "took", time.Since(start), "remembered_op_ids", ids.Ops, "remembered_request_ids", ids.Requests, "last_token", f.m.LastToken())
	f.restores.Add(1)
	f.at.index, f.at.term = 0, 0
	f.hub.reset()
	f.setLimits(f.m.Config())
	f.authOn.Store(f.m.AuthEnabled())
	f.keyed.Store(f.m.HasSigningKey())
	f.signalRules()
	return nil
}

// Thresholds of the id memories' fill (state.Machine.IDFill) at which
// the node says it is near its cap, and says it is no longer.
const (
	idNearCap  = 0.9
	idBelowCap = 0.8
)

// watchIDFill logs when an id memory reaches idNearCap of its cap (Warn,
// once) and when it falls below idBelowCap again (Info), and publishes it
// (nearCap: Status.IDMemoryNearCap, a metric). Near the cap, ids younger
// than the minimum retention fill the memory, so new ids are about to be
// refused. Called under mu.
func (f *fsm) watchIDFill() {
	fill := f.m.IDFill()
	switch near := f.nearCap.Load(); {
	case !near && fill >= idNearCap:
		f.nearCap.Store(true)
		ids, cfg := f.m.IDMemory(), f.m.Config()
		f.log().Warn("the id memory is near its cap: once it is full of ids younger than min_id_retention, new op_ids or request_ids are refused (RESOURCE_EXHAUSTED); raise --max-ids, or lower the load or --min-id-retention",
			"fill", fmt.Sprintf("%.0f%%", 100*fill), "op_ids", ids.Ops, "max_ops", ids.MaxOps, "request_ids", ids.Requests, "max_requests", ids.MaxRequests,
			"oldest_id_age", f.m.OldestIDAge(f.m.Now()), "min_id_retention", cfg.MinIDRetention, "bytes", ids.Bytes)
	case near && fill < idBelowCap:
		f.nearCap.Store(false)
		f.log().Info("the id memory is below its cap again", "fill", fmt.Sprintf("%.0f%%", 100*fill))
	}
}

func (f *fsm) log() *slog.Logger {
	if f.logger == nil {
		return slog.Default()
	}
	return f.logger
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

func (f *fsm) signalRules() {
	select {
	case f.rulesC <- struct{}{}:
	default:
	}
}

// read runs fn on the machine under a read lock.
func (f *fsm) read(fn func(m *state.Machine)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.m)
}

// fsmSnapshot is a copy of the state, encoded when raft persists it.
type fsmSnapshot struct{ view *state.SnapshotView }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<20)
	_, err := s.view.WriteTo(w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("node: snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.view = nil }
