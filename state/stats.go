package state

import "math"

// Statistics for metrics and status. They are not part of the state: a
// snapshot does not carry them, Restore resets them, and nothing the
// machine decides reads them.

// LeaseEnds counts the leases that ended in this machine since it was
// created or last restored: released (by their holder, a session close or
// a cancelled wait) and expired (their TTL or their session ran out in
// server time). A caller that counts across restores takes the difference
// around each Apply (package node does).
func (m *Machine) LeaseEnds() (released, expired uint64) {
	return m.ends[endReleased], m.ends[endExpired]
}

// Holders is the number of locks with a lease, as of the last command
// applied: O(1), kept as leases are granted and end (Locks is a scan). It
// differs from what Locks reports only for a lease whose end the decision
// time has passed but no command has settled yet (Locks reports that lock
// free already); the node's ticker applies a tick at each such deadline.
func (m *Machine) Holders() int { return m.holders }

// Resources is the number of fenced resources the machine holds, deleted
// ones (tombstones) included, as Config.MaxResources counts them.
func (m *Machine) Resources() int { return len(m.resources) }

// ResourceBytes is the total size of the resources' values, as
// Config.MaxResourceBytes counts it.
func (m *Machine) ResourceBytes() int64 { return m.resourceBytes }

// IDMemory is what the id memories hold (the op_id and request_id
// memories, memory.go), for metrics and status.
type IDMemory struct {
	Ops, Requests       int   // remembered op_ids and request_id outcomes
	MaxOps, MaxRequests int   // their caps (Config.MaxOps, MaxRequests)
	Bytes               int64 // heap of the two memories' rings, indexes and principal queues (a request outcome's names are shared with the lock's, and not counted)
}

// IDFill is IDMemory().Fill() in O(1): the fuller id memory as a fraction
// of its cap.
func (m *Machine) IDFill() float64 {
	return IDMemory{Ops: m.ops.len(), Requests: m.requests.len(), MaxOps: m.cfg.MaxOps, MaxRequests: m.cfg.MaxRequests}.Fill()
}

// IDMemory reports the id memories: O(principals with ids).
func (m *Machine) IDMemory() IDMemory {
	return IDMemory{Ops: m.ops.len(), Requests: m.requests.len(), MaxOps: m.cfg.MaxOps, MaxRequests: m.cfg.MaxRequests,
		Bytes: m.ops.bytes() + m.requests.bytes()}
}

// Fill is the fuller of the two memories as a fraction of its cap (0..1,
// above 1 while live requests that ended overshoot MaxRequests).
func (s IDMemory) Fill() float64 {
	f := func(n, max int) float64 {
		if max <= 0 {
			return 0
		}
		return float64(n) / float64(max)
	}
	return math.Max(f(s.Ops, s.MaxOps), f(s.Requests, s.MaxRequests))
}
