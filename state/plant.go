package state

import (
	"slices"

	"github.com/fenceworks/fence"
)

// The planted faults of state/internal/plant. Each is switched on only in a
// build with the plantbug tag and FENCE_PLANTBUG naming it; in a release
// build plant.On is a constant false, so the one-line hooks that call
// these helpers (in memory.go, seq.go, resources.go and acquire.go) and
// the helpers themselves are compiled away. They are kept out of line so
// that the build test can tell by symbol that they are absent.
//
// Each is deterministic (a function of the state and the command), so a
// replica replaying the log with the same faults on decides the same.

// plantForgetOps is the fault ids-forgotten for op_ids: at the start of
// every apply, an op_id remembered by an earlier command (at an earlier
// server time) is forgotten, whatever its age and the retention config.
// A write or add retried after its reply was lost is applied again.
//
//go:noinline
func (m *impl) plantForgetOps() {
	m.ops.forget(m.clock, 1, 1, m.cfg.MaxOps)
}

// plantForgetSaved is the fault ids-forgotten for sessions: the saved
// results of s from an earlier command (at an earlier server time) are
// forgotten before a sequenced command is looked up, so a retried seq is
// applied again.
//
//go:noinline
func (m *impl) plantForgetSaved(s *session) {
	s.results = slices.DeleteFunc(s.results, func(sv savedResult) bool { return sv.at < m.clock })
	if len(s.results) == 0 {
		s.results = nil
	}
}

// plantGrantHeld is the fault grant-held: when the last token issued is a
// multiple of 3, a lock held by another live lease counts as free for a
// new acquire; the lease it displaces ends as if released (its holder is
// not told). It reports whether the lock was made free.
//
//go:noinline
func (m *impl) plantGrantHeld(l *lockEntry) bool {
	if l == nil || len(l.holders) == 0 || m.counter%3 != 0 {
		return false
	}
	var work lockWork
	for _, g := range slices.Clone(l.holders) { // not "until none": set-split may keep one
		m.endLease(g, endReleased, m.expiryTime(), &work)
	}
	for _, wl := range work.locks {
		wl.queuedAt = 0 // not handed on: the plant grants l at once
		m.touch(wl)
	}
	return l.freeFor(fence.LockSpec{}, m.expiryTime())
}

// plantSharedBeside is the fault shared-beside: a shared acquire of lock l,
// held (or queued for), counts as free when the last token issued is a
// multiple of 3 — granted beside an exclusive holder.
//
//go:noinline
func (m *impl) plantSharedBeside(l *lockEntry) bool {
	return l != nil && len(l.holders) > 0 && l.permits == 0 && m.counter%3 == 0
}

// plantSetSplit is the fault set-split: a set's lease being released stays
// on its lock p (any but its first) when the last token issued is a
// multiple of 3.
//
//go:noinline
func (m *impl) plantSetSplit(g *grant, p part) bool {
	return len(g.parts()) > 1 && p.l != g.parts()[0].l && m.counter%3 == 0
}
