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
	written     atomic.Uint64 // bytes of all snapshots written by this process
	c           chan struct{} // cap 1: wakes runSnapshots
}

func newSnapTrigger(cfg Config, log *raftstore.GuardedLog) *snapTrigger {
	return &snapTrigger{cfg: cfg, log: log, c: make(chan struct{}, 1)}
}

// due reports whether the log since the last snapshot is over a bound:
// SnapshotBytes of command data; or SnapshotReplay commands (what a
// restart replays, bounded whatever the state's size); or
// SnapshotThreshold commands and at least 1/snapshotLogShare of the last
// snapshot's size in command data. The
// second part ties what a snapshot costs to what it saves: a state is
// written whole (copied while applies wait, then encoded beside them), so
// it is written again only once the log it saves replaying is a fixed
// share of it — the snapshot writes stay within snapshotLogShare times the
// log's own write rate however large the state grows, and a restart
// replays at most that share of the snapshot it restores. (An outside soak
// of a 151 MB state saw it rewritten every 35-60 s, ~3 MB/s a node: raft's
// own 30 s check, with its fixed entry count, fired long before this rule;
// raft's check is now off, raftConfig.)
func (t *snapTrigger) due() bool {
	logged := t.log.Stored() - t.bytesMark.Load()
	if logged >= t.cfg.SnapshotBytes {
		return true
	}
	cmds := t.log.Entries() - t.entriesMark.Load()
	if r := t.cfg.SnapshotReplay; r > 0 && cmds >= r { // 0: off (a Config without defaults, in tests)
		return true
	}
	return cmds >= t.cfg.SnapshotThreshold && logged >= t.lastSize.Load()/snapshotLogShare
}

// DefaultSnapshotReplay is Config.SnapshotReplay's default: 262,144
// commands, about 1 s of replay at the 3-4 µs a command the state machine
// took on a loaded 2-core box (docs/benchmarks.md, "Where a restart's
// time goes"). At issue 24's soak (~1,600 commands/s) it snapshots a
// state every 160 s at the least: under 0.5 MB/s of snapshot writes for
// states up to ~80 MB; a larger state is written more often than the
// share rule would (S/160 s), the price of a bounded restart.
const DefaultSnapshotReplay = 1 << 18

// snapshotLogShare: a state is snapshotted again once the log since its
// last snapshot holds 1/snapshotLogShare of that snapshot's bytes (and
// SnapshotThreshold commands). 4: snapshot writes at most 4 times the
// log's bytes; the log replayed on a restart at most a quarter of the
// snapshot restored.
const snapshotLogShare = 4

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
	t.written.Add(size)
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
