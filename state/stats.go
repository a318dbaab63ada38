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

// Resources is the number of fenced resources the machine holds, deleted
// ones (tombstones) included, as Config.MaxResources counts them.
func (m *Machine) Resources() int { return len(m.resources) }

// ResourceBytes is the total size of the resources' values, as
// Config.MaxResourceBytes counts it.
func (m *Machine) ResourceBytes() int64 { return m.resourceBytes }
