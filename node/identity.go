package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// nodeIDFile records, in the data dir, the node id the dir was first
// started with. raft keeps its configuration (ids and addresses) in the log
// but not which of them is this node: a restart with another --node-id ran
// as a stranger to its own log — it never elected, and members still
// listed the old id.
const nodeIDFile = "NODE_ID"

// checkNodeID refuses to start dir under another id than the one recorded
// in it, and records id in a dir that has none (a new dir, or one from
// before the file existed). started reports that the file was there: the
// dir has been started before. The caller holds the dir's lock.
func checkNodeID(dir, id string) (started bool, err error) {
	path := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if got := string(bytes.TrimSpace(b)); got != id {
			return true, fmt.Errorf("node: data dir %s belongs to node %q, but this start says node id %q: start it with --node-id %s (or give this node its own data dir)", dir, got, id, got)
		}
		return true, nil
	case !errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("node: read %s: %w", path, err)
	}
	if err := writeFileSync(dir, nodeIDFile, id+"\n"); err != nil {
		return false, fmt.Errorf("node: record the node id in %s: %w", path, err)
	}
	return false, nil
}

// writeFileSync replaces dir/name with content, durably: a temporary
// file written and synced, renamed over name, and the dir synced.
func writeFileSync(dir, name, content string) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, DataFileMode)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkAddress refuses a restart whose raft address differs from the one
// the cluster's configuration records for this node: raft would go on
// sending to the old address. A node moves by being removed and added
// again.
func (n *Node) checkAddress(local raft.ServerAddress) error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("node: read the raft configuration: %w", err)
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(n.cfg.NodeID) && s.Address != local && s.Address == raft.ServerAddress(n.cfg.NodeID) {
			// The in-memory transport's address: a single node's dir
			// (fence serve without --raft-addr, or fence restore
			// without it).
			return fmt.Errorf("node: data dir %s is a single node's (its raft address is its node id, %s), but this start is a cluster member at %s: start it without --raft-addr, or, to run this state in a cluster, back it up and fence restore it with --raft-addr %s",
				n.cfg.DataDir, s.Address, local, local)
		}
		if s.ID == raft.ServerID(n.cfg.NodeID) && s.Address != local {
			return fmt.Errorf("node: the cluster records node %s at raft address %s, but this start has %s: to move a node, remove it (fence members remove %s) and add it again at the new address (with an empty data dir)",
				n.cfg.NodeID, s.Address, local, n.cfg.NodeID)
		}
	}
	return nil
}

// checkLogReachable refuses a dir whose log and snapshots do not make a
// whole history, before raft reads them (it would start from what is
// left, granting tokens again, or panic: "log not found"):
//   - the log starts after the entry that follows the newest snapshot
//     (snapshots/ lost or emptied, or only its newest snapshot lost: the
//     entries between were compacted away);
//   - a snapshot is there but the stable store records no term (wal/,
//     which holds both, was lost: a node that forgot its term and vote
//     must not vote, and a single node would start again from the
//     snapshot, below tokens it granted after it);
//   - a single node that has voted has an empty log below its newest
//     snapshot (the log's segments were lost: raft keeps TrailingLogs
//     entries behind every snapshot, and the first election after a
//     restore writes one).
func checkLogReachable(cfg Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	dir := cfg.DataDir
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("node: read the log's first index: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("node: read the log's last index: %w", err)
	}
	metas, err := snaps.List()
	if err != nil {
		return fmt.Errorf("node: list snapshots: %w", err)
	}
	var newest uint64
	if len(metas) > 0 {
		newest = metas[0].Index // newest first
	}
	lost := func(what string) error {
		return fmt.Errorf("node: data dir %s: %s. Restore it from a backup (fence restore), or, in a cluster, remove this member and add it again with an empty data dir", dir, what)
	}
	if first > 0 && first > newest+1 {
		if newest == 0 {
			return lost(fmt.Sprintf("its raft log starts at entry %d but it holds no snapshot of the entries before: snapshots/ was lost or emptied", first))
		}
		return lost(fmt.Sprintf("its raft log starts at entry %d but its newest snapshot ends at entry %d: the snapshot of the entries between was lost", first, newest))
	}
	if newest == 0 {
		return nil
	}
	term, err := stable.GetUint64([]byte("CurrentTerm"))
	if err != nil && err.Error() != "not found" {
		return fmt.Errorf("node: read the current term: %w", err)
	}
	if term == 0 {
		return lost(fmt.Sprintf("it holds a snapshot up to entry %d but no raft term: the raft log and stable store (wal/) were lost", newest))
	}
	if !cfg.cluster() && last == 0 {
		// A dir InitDataDir built (a restore) holds a snapshot and no log
		// until its first election; it has never voted.
		voted, err := stable.GetUint64([]byte("LastVoteTerm"))
		if err != nil && err.Error() != "not found" {
			return fmt.Errorf("node: read the last vote: %w", err)
		}
		if voted != 0 {
			return lost(fmt.Sprintf("its raft log is empty below its snapshot up to entry %d: the log's segments were lost", newest))
		}
	}
	return nil
}
