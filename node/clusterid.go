package node

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

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

// muxClusterID is what the raft port reads at every raft dial and accept
// (raftstore.Mux.SetClusterID): the state's cluster id, or the last one
// read while the FSM is held by an apply or a snapshot restore (a
// connection does not wait for those).
func (n *Node) muxClusterID() func() string {
	var last atomic.Pointer[string]
	return func() string {
		if n.fsm.mu.TryRLock() {
			id := n.fsm.m.ClusterID()
			n.fsm.mu.RUnlock()
			last.Store(&id)
			return id
		}
		if p := last.Load(); p != nil {
			return *p
		}
		return ""
	}
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
