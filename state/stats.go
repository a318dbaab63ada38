package state

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
