package state

import (
	"fmt"

	"github.com/fenceworks/fence"
)

// The cluster id names a store's history: it is chosen (at random, by the
// node, never by the machine) by the first leader that takes office on a
// log without one, and carried in the OpConfig it proposes then
// (Command.ClusterID). The first such command applied records it; a later
// one never changes it (two leaders in a row may both have proposed one:
// the second is ignored, its rules still apply). Snapshots keep it
// (cluster_id, absent when empty, so older snapshots load). A backup
// records it; a restore gives the restored state a new one
// (SetRestoredClusterID: a restore makes a new cluster).

// MaxClusterIDBytes bounds a cluster id.
const MaxClusterIDBytes = fence.MaxClusterIDBytes

// ValidateClusterID checks a cluster id: 1 to MaxClusterIDBytes bytes of
// ASCII letters, digits, '-' and '_'.
func ValidateClusterID(id string) error {
	if id == "" || len(id) > MaxClusterIDBytes {
		return fence.Invalid("cluster_id", fmt.Sprintf("1 to %d bytes", MaxClusterIDBytes), fmt.Sprintf("%d bytes", len(id)))
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fence.Invalid("cluster_id", "ASCII letters, digits, '-' and '_'", fmt.Sprintf("%q", id))
		}
	}
	return nil
}

// ClusterID is the store's cluster id, "" until a command recorded one.
func (m *Machine) ClusterID() string { return m.clusterID }

// SetRestoredClusterID gives a machine restored from a backup a new
// cluster id (a restore makes a new cluster: its nodes are not the backed-up
// cluster's). For backup.Restore only, on a machine no replica runs, before
// its first snapshot is written: a replica's cluster id changes only by the
// log (never, once recorded).
func (m *Machine) SetRestoredClusterID(id string) error {
	if err := ValidateClusterID(id); err != nil {
		return err
	}
	if old := m.clusterID; old != "" && old != id {
		// The keys it keeps signed proofs naming the old id: the key set
		// lists it (keys.go).
		m.keys.restoredFrom = append([]string{old}, m.keys.restoredFrom...)
		if len(m.keys.restoredFrom) > MaxRestoredFrom {
			m.keys.restoredFrom = m.keys.restoredFrom[:MaxRestoredFrom]
		}
	}
	m.clusterID = id
	return nil
}

// recordClusterID checks cmd's cluster id (only an OpConfig may carry
// one) and records it if the machine has none. It runs before the op.
func (m *impl) checkClusterID(cmd Command) error {
	if cmd.ClusterID == "" {
		return nil
	}
	if cmd.Op != OpConfig {
		return fence.Invalid("cluster_id", "only on a config command", fmt.Sprintf("%q on op %d", cmd.ClusterID, cmd.Op))
	}
	return ValidateClusterID(cmd.ClusterID)
}
