package node

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
)

// snapTrigger decides when the node takes a snapshot: once the log written
// since the last snapshot holds Config.SnapshotThreshold commands (a group
// entry counts its commands) or Config.SnapshotBytes bytes of command data,
// whichever comes first. raft's own trigger only looks every
// SnapshotInterval and only counts entries, so a burst of millions of
// commands (or of large writes) between two looks left a log that a
// restart had to replay in full. A restart now restores the last snapshot
// and replays at most about one threshold of commands.
type snapTrigger struct {
	cfg         Config
	log         *raftstore.GuardedLog
	bytesMark   atomic.Uint64 // log counters when the last written snapshot began
	entriesMark atomic.Uint64
	taken       atomic.Uint64 // snapshots written by this process
	lastSize    atomic.Uint64 // bytes of the last snapshot written
	c           chan struct{} // cap 1: wakes runSnapshots
}

func newSnapTrigger(cfg Config, log *raftstore.GuardedLog) *snapTrigger {
	return &snapTrigger{cfg: cfg, log: log, c: make(chan struct{}, 1)}
}

// due reports whether the log since the last snapshot is over a bound:
// SnapshotBytes of command data, or SnapshotThreshold entries and at least
// one entry per snapshotBytesPerEntry bytes of the last snapshot. The
// second part keeps the cost of snapshotting a large state (it is copied
// whole while applies wait, then encoded beside them) proportional to the
// log it saves replaying: a restart replays about as long as it restores.
func (t *snapTrigger) due() bool {
	if t.log.Stored()-t.bytesMark.Load() >= t.cfg.SnapshotBytes {
		return true
	}
	need := max(t.cfg.SnapshotThreshold, t.lastSize.Load()/snapshotBytesPerEntry)
	return t.log.Entries()-t.entriesMark.Load() >= need
}

// snapshotBytesPerEntry sets how much log a state of a given snapshot size
// may gather before it is snapshotted again. Snapshotting costs what the
// state holds (the copy applies wait for is per lock, id and session), not
// the bytes it encodes to: the protobuf records (fence-state/2) take about
// 2.5 times fewer bytes than the JSON the constant was first set against
// (600,000 remembered ids: 36.9 MB against 91.6 MB), so it is 2.5 times
// 256, which keeps the snapshots of a given state as rare as they were. A
// restart then replays about 2.5 times as long as it restores (~1.4 s to
// restore those ids here; the log replays ~100,000 entries a second).
const snapshotBytesPerEntry = 640

// check runs after every log write: it wakes runSnapshots when due.
func (t *snapTrigger) check() {
	if t.due() {
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

type snapMark struct{ bytes, entries uint64 }

// mark is taken when raft creates a snapshot: the snapshot covers at least
// what was written to the log by then (raft snapshots the applied state,
// which may lag the log a little; the next trigger catches that up).
func (t *snapTrigger) mark() any {
	return snapMark{t.log.Stored(), t.log.Entries()}
}

// done is called when a snapshot of size bytes has been written.
func (t *snapTrigger) done(m any, size uint64) {
	t.lastSize.Store(size)
	sm := m.(snapMark)
	storeMax(&t.bytesMark, sm.bytes)
	storeMax(&t.entriesMark, sm.entries)
	t.taken.Add(1)
}

func storeMax(v *atomic.Uint64, x uint64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// runSnapshots takes a snapshot whenever the trigger says it is due.
func (n *Node) runSnapshots() {
	defer n.wg.Done()
	for {
		select {
		case <-n.closing:
			return
		case <-n.snap.c:
		}
		if !n.snap.due() {
			continue
		}
		err, ok := n.await(context.Background(), n.raft.Snapshot())
		if !ok {
			return
		}
		if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			n.cfg.Logger.Warn("snapshot failed", "err", err)
			select {
			case <-n.closing:
				return
			case <-time.After(time.Second):
			}
		}
	}
}
