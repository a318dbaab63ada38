package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/state"
)

// RestoreOptions say where and how Restore builds the data dir.
type RestoreOptions struct {
	// DataDir is the data dir to create: it must not exist or be empty.
	DataDir string
	// NodeID is the restored node's id (default "fence-1", as fence serve's).
	NodeID string
	// RaftAddr, for a node that will run as a cluster member (fence serve
	// --raft-addr), is its advertised raft address: the restored
	// configuration is one voter, NodeID at RaftAddr, which others then
	// join. Empty: a single node.
	RaftAddr string
	// LogStore is the raft log store kind: node.LogStoreWAL or empty (the
	// same).
	LogStore string
	// Floors are tokens issued or accepted before the restore (--floor,
	// --floor-from): the first token will be above every one.
	Floors []Floor
	// Now is the wall-clock time of the restore (the wall floor).
	Now time.Time
	// Logger receives the data dir's creation lines (raft's stores); nil
	// discards them (fence restore prints its Report).
	Logger *slog.Logger
}

// Report is what Restore did.
type Report struct {
	Header Header      `json:"header"`
	Old    fence.Token `json:"old"`    // the backup's counter
	Floors []Floor     `json:"floors"` // every floor considered: the backup's, the given ones, the wall clock's
	First  fence.Token `json:"first"`  // the first token the restored node will issue
	// Warnings are things the operator should know (the wall floor did not
	// count, the clock was behind and --floor was given).
	Warnings []string `json:"warnings,omitempty"`
	// Term is the raft term the restored log starts at (RestoreTerm).
	Term uint64 `json:"term,omitempty"`
	// ClusterID is the restored cluster's new id; RestoredFrom the
	// backed-up cluster's (Header.ClusterID). A restore makes a new
	// cluster: the old one's nodes are not its members.
	ClusterID    string `json:"cluster_id,omitempty"`
	RestoredFrom string `json:"restored_from,omitempty"`
}

// RestoreTerm is the raft term a restored log starts at: the larger of the
// backup's term + 1 and unix_ms(now), so that it is above every term the
// backed-up cluster (or an earlier restore's) reached since, under the
// wall floor's assumption (fewer than one election a millisecond).
func RestoreTerm(backupTerm uint64, now time.Time) uint64 {
	t := backupTerm + 1
	if ms := now.UnixMilli(); ms > 0 && uint64(ms) > t {
		t = uint64(ms)
	}
	return t
}

// ErrDirNotEmpty: the data dir to restore into holds something (an empty
// lost+found directory alone counts as empty); ErrNotDirectory: it is not
// a directory.
var (
	ErrDirNotEmpty  = node.ErrDirNotEmpty
	ErrNotDirectory = node.ErrNotDirectory
)

// RestoredFile is the marker Restore leaves in the data dir: the report,
// as JSON. The node logs "state restored from backup" with it at its first
// start and removes it.
const RestoredFile = node.RestoredFile

// Restore builds a fresh data dir from the backup file at path, from which
// fence serve (same data dir and node id, and raft address for a cluster
// member) starts with the backed-up state and the counter raised as Plan
// says. Before writing anything it checks opts, that the data dir is
// empty, the whole file (ErrCorrupt, ErrTruncated, ErrFormat), and the
// clock (ErrClockBehind); on any of these refusals the dir is untouched.
func Restore(ctx context.Context, path string, opts RestoreOptions) (Report, error) {
	if opts.DataDir == "" {
		return Report{}, fence.Invalid("data_dir", "not empty", "")
	}
	if opts.NodeID == "" {
		opts.NodeID = "fence-1"
	}
	switch opts.LogStore {
	case "", node.LogStoreWAL:
	default:
		return Report{}, fence.Invalid("log_store", fmt.Sprintf("%q", node.LogStoreWAL), opts.LogStore)
	}
	if opts.RaftAddr != "" {
		if host, port, err := net.SplitHostPort(opts.RaftAddr); err != nil || host == "" || port == "" || port == "0" {
			return Report{}, fence.Invalid("raft_addr", "host:port (the address other nodes reach this one at)", opts.RaftAddr)
		}
	}
	if err := node.CheckEmptyDir(opts.DataDir); err != nil {
		return Report{}, err
	}
	h, err := verifyFile(path)
	if err != nil {
		return Report{}, err
	}
	rep, err := Plan(h, opts)
	if err != nil {
		return rep, err
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	m, err := loadState(path, h)
	if err != nil {
		return rep, err
	}
	// The counter is raised with the machine's own command, as a leader
	// would propose it: the next grant is rep.First. It is stamped with the
	// backup's server time (a leader's backup: the leader clock when it was
	// asked for, at or after the state's last command), so the restored
	// clock resumes there and a lease gets back none of the time the store
	// was idle before the backup. Its Slack is the largest the state has
	// applied, as a new leader's first decisions are charged (node/doc.go
	// "Across terms"): no lease is decided over sooner than the backed-up
	// leader would have.
	bump := state.Command{Op: state.OpBumpToken, Token: rep.First, Now: max(m.Now(), h.ServerTimeNS), Slack: m.MaxSlack()}
	if res := m.Apply(bump); res.Err != nil {
		return rep, fmt.Errorf("backup: raise the counter to %d: %w", rep.First, res.Err)
	}
	if got := m.LastToken(); got != rep.First-1 {
		return rep, fmt.Errorf("backup: the counter is %d after raising it for first token %d", got, rep.First)
	}
	id, err := node.NewClusterID()
	if err != nil {
		return rep, err
	}
	if err := m.SetRestoredClusterID(id); err != nil {
		return rep, err
	}
	rep.ClusterID, rep.RestoredFrom = id, h.ClusterID
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := node.Config{DataDir: opts.DataDir, NodeID: opts.NodeID, LogStore: opts.LogStore, Logger: logger}
	if opts.RaftAddr != "" {
		cfg.Peers = []node.Peer{{ID: opts.NodeID, Addr: opts.RaftAddr}}
	}
	// The restored log starts at a term far above any the backed-up
	// cluster reached (unix_ms(now), as the wall floor: elections are
	// fewer than one a millisecond): an old member started against the
	// restored cluster (old data dir, same id and address) holds entries
	// at the same indexes with lower terms, so its log never matches the
	// restored one — the leader installs the restored snapshot on it
	// instead of taking it as a follower with its old state and counter,
	// and its own elections (a lower term) are ignored.
	rep.Term = RestoreTerm(h.Term, opts.Now)
	if err := node.InitDataDir(cfg, m, h.AppliedIndex, rep.Term); err != nil {
		return rep, err
	}
	marker, _ := json.MarshalIndent(struct {
		Backup string `json:"backup"`
		Report
	}{path, rep}, "", "  ")
	if err := writeFileSync(filepath.Join(opts.DataDir, RestoredFile), append(marker, '\n')); err != nil {
		return rep, fmt.Errorf("backup: write %s: %w", RestoredFile, err)
	}
	return rep, nil
}

// verifyFile reads the whole file at path and checks it.
func verifyFile(path string) (Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	h, _, err := Verify(f)
	if err != nil {
		return Header{}, fmt.Errorf("backup %s: %w", path, err)
	}
	return h, nil
}

// loadState reads the file again into a machine; the file must still be
// the one verified (the Reader checks the trailer again) and its state must
// agree with its header.
func loadState(path string, want Header) (*state.Machine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	r, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", path, err)
	}
	if r.Header() != want {
		return nil, fmt.Errorf("backup %s: %w", path, &FileError{Kind: ErrCorrupt, Offset: int64(len(Magic)), Detail: "the header changed since the file was verified"})
	}
	m := state.New()
	if err := m.Restore(r); err != nil {
		var fe *FileError
		if errors.As(r.err, &fe) { // the file went bad under the reading (state.Restore keeps only the message)
			return nil, fmt.Errorf("backup %s: %w", path, fe)
		}
		return nil, fmt.Errorf("backup %s: %w: the state does not load: %v", path, ErrCorrupt, err)
	}
	if m.LastToken() != want.LastToken {
		return nil, fmt.Errorf("backup %s: %w: the header records last token %d, the state's counter is %d", path, ErrCorrupt, want.LastToken, m.LastToken())
	}
	if m.ClusterID() != want.ClusterID {
		return nil, fmt.Errorf("backup %s: %w: the header records cluster id %q, the state %q", path, ErrCorrupt, want.ClusterID, m.ClusterID())
	}
	return m, nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
