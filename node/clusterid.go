package node

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/state"
)

// NewClusterID chooses a cluster id: 128 random bits as a UUID (version 4).
// The first leader of a log uses it, and backup.Restore for the cluster it
// makes.
func NewClusterID() (string, error) { return newClusterID() }

func newClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("node: cluster id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	id := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	return id, state.ValidateClusterID(id)
}

// ClusterIDFile records, in the data dir, the cluster id the node's state
// last held. The state learns its id only as it applies the log (or
// restores a snapshot), which a restarted member does only once a leader
// has told it what is committed; until then its raft port would take
// connections from a node of any cluster — a re-bootstrapped old member
// could replicate into it or win its vote. With the file, a restarted node
// knows its cluster at once (raftstore's HeaderRaftCluster check).
const ClusterIDFile = "CLUSTER_ID"

// scanLogClusterID returns the cluster id an OpConfig of the local log
// records ("" if none does): for a dir without ClusterIDFile (written
// before the file existed, or the file lost), so that its raft port knows
// its cluster from the start all the same. An entry that does not decode
// is skipped (the FSM will refuse it when it applies it).
func scanLogClusterID(logs raft.LogStore) string {
	first, err := logs.FirstIndex()
	if err != nil {
		return ""
	}
	last, err := logs.LastIndex()
	if err != nil {
		return ""
	}
	for i := max(first, 1); i <= last; i++ {
		var l raft.Log
		if logs.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
			continue
		}
		cmds, err := decodeEntry(l.Data)
		if err != nil {
			continue
		}
		for _, c := range cmds {
			if c.Op == state.OpConfig && c.ClusterID != "" {
				return c.ClusterID
			}
		}
	}
	return ""
}

// readClusterIDFile returns the cluster id recorded in dir ("" if none).
func readClusterIDFile(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ClusterIDFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("node: read %s: %w", ClusterIDFile, err)
	}
	id := strings.TrimSpace(string(b))
	if err := state.ValidateClusterID(id); err != nil {
		return "", fmt.Errorf("node: %s in %s: %w", ClusterIDFile, dir, err)
	}
	return id, nil
}

// persistClusterID records the state's cluster id in ClusterIDFile when it
// is known and not yet recorded (watchRules calls it at start and after
// every change of the rules, which carry the id).
func (n *Node) persistClusterID() {
	id := n.ClusterID()
	if id == "" || id == *n.persistedID.Load() {
		return
	}
	if old := *n.persistedID.Load(); old != "" {
		n.cfg.Logger.Error("the state's cluster id differs from the one this data dir recorded; recording the state's", "recorded", old, "state", id)
	}
	if err := writeFileSync(n.cfg.DataDir, ClusterIDFile, id+"\n"); err != nil {
		n.cfg.Logger.Error("recording the cluster id failed: until the log is applied after a restart, this node's raft port will not know its cluster", "err", err)
		return
	}
	n.persistedID.Store(&id)
}

// chooseClusterID chooses the cluster id of a cluster a --bootstrap node
// is about to make, and records it (ClusterIDFile) before raft starts: its
// first leader term carries it in the first OpConfig (takeOffice), and its
// raft port carries it from the first connection. A node that knew no id
// until its first leader's OpConfig applied accepted anyone's raft
// connections until then: a member wiped and restarted with --bootstrap
// while its old peers ran was reached by their leader's heartbeat first,
// and taken back as an empty voter of the old cluster (third outside
// attack). With the id known, the raft port refuses that leader (a node of
// another cluster). A node with a raft port (Config.Mux) chooses it
// earlier still, in open before its transport exists (the transport takes
// connections from the moment it is made); this covers the others. A
// --peers node cannot choose alone (its peers must agree on one id); it
// learns the id from its first leader.
func (n *Node) chooseClusterID() error {
	if *n.persistedID.Load() != "" {
		return nil
	}
	id, err := newClusterID()
	if err != nil {
		return err
	}
	if err := writeFileSync(n.cfg.DataDir, ClusterIDFile, id+"\n"); err != nil {
		return fmt.Errorf("node: record the new cluster's id in %s: %w", filepath.Join(n.cfg.DataDir, ClusterIDFile), err)
	}
	n.persistedID.Store(&id)
	n.cfg.Logger.Info("chose the new cluster's id", "cluster_id", id)
	return nil
}

// muxClusterID is what the raft port reads at every raft dial and accept
// (raftstore.Mux.SetClusterID): the state's cluster id, or the last one
// read while the FSM is held by an apply or a snapshot restore (a
// connection does not wait for those), or, while the state knows none
// yet, the one the data dir recorded (ClusterIDFile).
func (n *Node) muxClusterID() func() string {
	var last atomic.Pointer[string]
	return func() string {
		var id string
		if n.fsm.mu.TryRLock() {
			id = n.fsm.m.ClusterID()
			n.fsm.mu.RUnlock()
			last.Store(&id)
		} else if p := last.Load(); p != nil {
			id = *p
		}
		if id == "" {
			id = *n.persistedID.Load()
		}
		return id
	}
}

// LostStateError: a data dir that has been started before (it records a
// node id) holds no raft log and no snapshot — its wal/ or snapshots/ were
// lost — and this start would bootstrap it (a single node, --bootstrap or
// --peers): a new store whose tokens start again at 1, below tokens
// already granted. Open refuses it.
type LostStateError struct {
	Dir, NodeID string
}

func (e *LostStateError) Error() string {
	return fmt.Sprintf("node: data dir %s has been started before (it records node id %s in %s) but holds no raft log and no snapshot: its wal/ or snapshots/ are gone. "+
		"Bootstrapping it would start a new store whose tokens begin again at 1, below tokens already granted. Restore it from a backup (fence restore), "+
		"or, in a cluster, start this node with an empty data dir and add it again (fence members remove %s, then --join); to start a new store here on purpose, remove %s",
		e.Dir, e.NodeID, nodeIDFile, e.NodeID, filepath.Join(e.Dir, nodeIDFile))
}

// ClusterID is the cluster id recorded in the applied state ("" until the
// first leader's OpConfig carrying it is applied).
func (n *Node) ClusterID() string {
	var id string
	n.fsm.read(func(m *state.Machine) { id = m.ClusterID() })
	return id
}

// logRestored logs, at the first start of a data dir a restore built, what
// the restore did (RestoredFile, written by backup.Restore), and removes
// the marker so later starts do not log it again.
func (n *Node) logRestored() {
	path := filepath.Join(n.cfg.DataDir, RestoredFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		n.cfg.Logger.Warn("reading the restore marker failed", "path", path, "err", err)
		return
	}
	var r struct {
		Backup       string `json:"backup"`
		ClusterID    string `json:"cluster_id"`
		RestoredFrom string `json:"restored_from"`
		Header       struct {
			ClusterID    string `json:"cluster_id"`
			NodeID       string `json:"node_id"`
			AppliedIndex uint64 `json:"applied_index"`
			WallUnixMS   int64  `json:"wall_unix_ms"`
		} `json:"header"`
		Old    uint64 `json:"old"`
		First  uint64 `json:"first"`
		Floors []struct {
			Source string `json:"source"`
			Token  uint64 `json:"token"`
		} `json:"floors"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		n.cfg.Logger.Warn("the restore marker is not readable", "path", path, "err", err)
	}
	floors := make([]string, 0, len(r.Floors))
	for _, f := range r.Floors {
		floors = append(floors, fmt.Sprintf("%s=%d", f.Source, f.Token))
	}
	n.cfg.Logger.Info("state restored from backup", "backup", r.Backup, "backup_node_id", r.Header.NodeID, "cluster_id", n.ClusterID(), "restored_from", r.RestoredFrom,
		"applied_index", r.Header.AppliedIndex, "old_last_token", r.Old, "first_token", r.First, "floors", floors, "last_token", n.LastToken())
	if err := os.Remove(path); err != nil {
		n.cfg.Logger.Warn("removing the restore marker failed", "path", path, "err", err)
		return
	}
	syncDir(n.cfg.DataDir)
}
