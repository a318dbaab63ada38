package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/raftstore"
	"github.com/fenceworks/fence/state"
)

// ErrDirNotEmpty: a data dir to be created from a state (InitDataDir, a
// restore) already holds something.
var ErrDirNotEmpty = errors.New("data dir is not empty")

// RestoredFile is the marker a restore leaves in the data dir it built
// (backup.Restore writes it: its report, as JSON). Open logs "state restored
// from backup" with its content at the node's first start, then removes it.
const RestoredFile = "RESTORED"

// ErrNotDirectory: a data dir to be created from a state names something
// that exists and is not a directory (a regular file).
var ErrNotDirectory = errors.New("data dir is not a directory")

// lostFound is the directory mkfs.ext4 puts at a volume's root: a fresh
// volume mounted as the data dir holds it, empty. fence serve starts in
// such a dir; CheckEmptyDir counts it as empty too, and InitDataDir's undo
// leaves it.
const lostFound = "lost+found"

// emptyLostFound reports whether name in dir is an empty lost+found
// directory.
func emptyLostFound(dir, name string) bool {
	if name != lostFound {
		return false
	}
	p := filepath.Join(dir, name)
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

// CheckEmptyDir refuses a dir that exists and holds anything (the error
// wraps ErrDirNotEmpty and names a few entries) or is not a directory
// (ErrNotDirectory). A dir that does not exist is fine, and so is one that
// holds only an empty lost+found directory (a fresh ext4 volume's root).
func CheckEmptyDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node: data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is a %s (give a new or empty directory)", ErrNotDirectory, dir, fileKind(fi))
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("node: data dir: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(5)
	if err != nil && err != io.EOF {
		return fmt.Errorf("node: data dir %s: %w", dir, err)
	}
	for i, n := range names {
		if emptyLostFound(dir, n) {
			names = append(names[:i:i], names[i+1:]...)
			break
		}
	}
	if len(names) > 0 {
		more := ""
		if len(names) > 3 {
			names, more = names[:3], ", ..."
		}
		return fmt.Errorf("%w: %s holds %s%s (give a new or empty directory)", ErrDirNotEmpty, dir, strings.Join(names, ", "), more)
	}
	return nil
}

// InitDataDir creates a data dir from machine m as of raft index and term
// (a restore): cfg.DataDir must not exist or be empty (ErrDirNotEmpty). It
// writes the NODE_ID file (cfg.NodeID, default "fence-1"), empty raft
// stores of kind cfg.LogStore (default LogStoreWAL), the current term, and
// one raft snapshot of m at index and term whose configuration is one
// voter: cfg.NodeID at the in-memory transport's address for a single node
// (no cfg.Peers), or at cfg.Peers[0].Addr for a cluster member (cfg.Peers
// is then exactly that node). Open with the same DataDir and NodeID (and,
// for a cluster member, a mux on that address, no Bootstrap or Peers)
// starts from m; other nodes then join it. On an error after the checks
// the dir is left as it was found (removed, or emptied).
func InitDataDir(cfg Config, m *state.Machine, index, term uint64) (err error) {
	cfg = cfg.withDefaults()
	if cfg.DataDir == "" {
		return fmt.Errorf("node: init data dir: data_dir is empty")
	}
	if m == nil {
		return fmt.Errorf("node: init data dir: no state")
	}
	addr := raft.ServerAddress(cfg.NodeID) // the single node's in-memory transport (Config.transport)
	switch {
	case len(cfg.Peers) == 1 && cfg.Peers[0].ID == cfg.NodeID && cfg.Peers[0].Addr != "":
		addr = raft.ServerAddress(cfg.Peers[0].Addr)
	case len(cfg.Peers) > 0:
		return fmt.Errorf("node: init data dir: peers must be this node alone (%q with its raft address), got %v", cfg.NodeID, cfg.Peers)
	case cfg.Transport != nil:
		addr = cfg.Transport.LocalAddr()
	}
	index, term = max(index, 1), max(term, 1)
	if err := CheckEmptyDir(cfg.DataDir); err != nil {
		return err
	}
	_, statErr := os.Stat(cfg.DataDir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(cfg.DataDir, DataDirMode); err != nil {
		return fmt.Errorf("node: data dir: %w", err)
	}
	defer func() {
		if err != nil {
			undoDir(cfg.DataDir, created)
		}
	}()
	store, err := raftstore.Open(raftstore.Config{Dir: cfg.DataDir, Kind: cfg.LogStore,
		LockTimeout: cfg.LockTimeout, WALSegmentSize: cfg.WALSegmentSize, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("node: init data dir: close the stores: %w", cerr)
		}
	}()
	if _, err := checkNodeID(cfg.DataDir, cfg.NodeID); err != nil {
		return err
	}
	// raft's key for the current term (raft.keyCurrentTerm): a node whose
	// term is below its last entry's would elect itself in an older term.
	if err := store.Stable.SetUint64([]byte("CurrentTerm"), term); err != nil {
		return fmt.Errorf("node: init data dir: store the term: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, raftstore.NewHCLogger(cfg.Logger))
	if err != nil {
		return fmt.Errorf("node: snapshot store: %w", err)
	}
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: addr}}}
	// Create encodes the legacy peers field with the transport's
	// EncodePeer (raft's in-memory and TCP transports both write the
	// address as is); it needs one, not a running one.
	_, trans := raft.NewInmemTransport(addr)
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, conf, index, trans)
	if err != nil {
		return fmt.Errorf("node: init data dir: create the snapshot: %w", err)
	}
	w := bufio.NewWriterSize(sink, 1<<20)
	if _, err := m.SnapshotView().WriteTo(w); err != nil {
		sink.Cancel()
		return fmt.Errorf("node: init data dir: write the snapshot: %w", err)
	}
	if err := w.Flush(); err != nil {
		sink.Cancel()
		return fmt.Errorf("node: init data dir: write the snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("node: init data dir: write the snapshot: %w", err)
	}
	if err := syncDir(cfg.DataDir); err != nil {
		return fmt.Errorf("node: init data dir: %w", err)
	}
	cfg.Logger.Info("data dir initialised from a state", "data_dir", cfg.DataDir, "node_id", cfg.NodeID, "raft_addr", addr,
		"index", index, "term", term, "last_token", m.LastToken(), "log_store", store.Kind)
	return nil
}

// undoDir leaves dir as InitDataDir found it: removed if it created it,
// else emptied.
func undoDir(dir string, created bool) {
	if created {
		os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == lostFound { // it was empty (CheckEmptyDir); it stays
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// fileKind names what fi is, for a message.
func fileKind(fi os.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return "regular file"
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "non-directory (" + fi.Mode().Type().String() + ")"
}
