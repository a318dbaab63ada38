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
	"slices"
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
	// Hook, when set (tests only), is called at each step of building the
	// data dir with the step's name: RestoreStaged (the staging directory
	// made, empty), RestoreBuilt (the store and the RESTORED marker written
	// in it), RestoreSynced (all of it fsynced), RestoreMoved (in place: the
	// entries moved into the data dir, the staging directory not yet
	// removed) and RestoreRenamed (the staging directory renamed to the data
	// dir, the parent not yet fsynced). A test kills the restore there.
	Hook func(step string)
}

// The steps of RestoreOptions.Hook.
const (
	RestoreStaged  = "staged"
	RestoreBuilt   = "built"
	RestoreSynced  = "synced"
	RestoreMoved   = "moved"
	RestoreRenamed = "renamed"
)

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
	// SigningKey is the id of the fresh signing key the restored cluster
	// signs grants with (the backup's keys are kept public-only, without
	// their private seeds: they verify the proofs made before and never
	// sign again). Guards learn it from the restored cluster's key set
	// (fence keys --json, GET /v1/keys).
	SigningKey string `json:"signing_key,omitempty"`
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
// empty and no earlier restore into it was left unfinished
// (node.ErrRestoreIncomplete), the whole file (ErrCorrupt, ErrTruncated,
// ErrFormat), and the clock (ErrClockBehind); on any of these refusals the
// dir is untouched.
//
// It is all-or-nothing (node/restoring.go): the data dir is built in a
// staging directory — DataDir + ".restoring" beside an absent DataDir, or
// DataDir/.restoring inside an existing empty one (a mount point) —
// fsynced whole, then made the data dir in one step (a rename; in place,
// moving the entries, then removing the staging directory last). A crash
// before that step leaves DataDir as it was and the staging directory,
// which fence serve (node.Open) and the next Restore refuse, naming it.
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
	if err := node.CheckRestoreLeftover(opts.DataDir); err != nil {
		return Report{}, err
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
	// A fresh signing key; every key the state had is kept public-only
	// (the old proofs still verify, and the old cluster id is listed as
	// restored_from, but the restored store holds none of their seeds: a
	// staging cluster restored from production cannot sign a proof
	// production's guards accept). Live leases keep their key and its
	// count; their proofs are by the fresh key from now on. A second
	// cluster restored from the same backup signs with a key the first
	// one's guards never learned.
	seed, err := node.NewKeySeed()
	if err != nil {
		return rep, err
	}
	if rep.SigningKey, err = m.AddRestoredKey(seed); err != nil {
		return rep, fmt.Errorf("backup: add a signing key: %w", err)
	}
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
	marker, _ := json.MarshalIndent(struct {
		Backup string `json:"backup"`
		Report
	}{path, rep}, "", "  ")
	if err := build(opts, cfg, m, h.AppliedIndex, rep.Term, append(marker, '\n')); err != nil {
		return rep, err
	}
	return rep, nil
}

// build makes opts.DataDir the data dir of m (InitDataDir) with the
// RESTORED marker, all-or-nothing: see Restore.
func build(opts RestoreOptions, cfg node.Config, m *state.Machine, index, term uint64, marker []byte) error {
	hook := opts.Hook
	if hook == nil {
		hook = func(string) {}
	}
	dir := filepath.Clean(opts.DataDir)
	_, err := os.Lstat(dir)
	inPlace := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: data dir: %w", err)
	}
	stage := node.RestoringPath(dir)
	if inPlace {
		stage = filepath.Join(dir, node.RestoringSubdir)
	} else if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("backup: data dir: %w", err)
	}
	// Mkdir, not MkdirAll: two restores into one dir cannot share it.
	if err := os.Mkdir(stage, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return &node.RestoreIncompleteError{DataDir: opts.DataDir, Staging: stage}
		}
		return fmt.Errorf("backup: staging directory: %w", err)
	}
	committing := false
	defer func() {
		if !committing { // nothing is in the data dir yet: leave it as found
			os.RemoveAll(stage)
		}
	}()
	hook(RestoreStaged)
	cfg.DataDir = stage
	if err := node.InitDataDir(cfg, m, index, term); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(stage, RestoredFile), marker); err != nil {
		return fmt.Errorf("backup: write %s: %w", RestoredFile, err)
	}
	hook(RestoreBuilt)
	if err := node.SyncTree(stage); err != nil {
		return fmt.Errorf("backup: fsync the staging directory %s: %w", stage, err)
	}
	hook(RestoreSynced)
	if !inPlace {
		if err := os.Rename(stage, dir); err != nil {
			return fmt.Errorf("backup: rename %s to %s: %w", stage, dir, err)
		}
		committing = true
		hook(RestoreRenamed)
		if err := node.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("backup: fsync %s after the rename: %w", filepath.Dir(dir), err)
		}
		return nil
	}
	// In place: from the first move on, dir holds part of the store, and
	// the staging directory in it (removed last) marks it unfinished.
	committing = true
	entries, err := os.ReadDir(stage)
	if err != nil {
		return fmt.Errorf("backup: staging directory: %w", err)
	}
	// The snapshot first, the RESTORED marker last: a DIR holding the
	// marker always holds the snapshot (node.CheckRestoreLeftover checks
	// it, should the staging directory be removed by hand).
	rank := func(name string) int {
		switch name {
		case "snapshots":
			return 0
		case RestoredFile:
			return 2
		}
		return 1
	}
	slices.SortStableFunc(entries, func(a, b os.DirEntry) int { return rank(a.Name()) - rank(b.Name()) })
	for _, e := range entries {
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("backup: move %s into %s: %w", e.Name(), dir, err)
		}
	}
	if err := node.SyncDir(dir); err != nil {
		return fmt.Errorf("backup: fsync %s: %w", dir, err)
	}
	hook(RestoreMoved)
	if err := os.Remove(stage); err != nil {
		return fmt.Errorf("backup: remove the staging directory %s: %w", stage, err)
	}
	if err := node.SyncDir(dir); err != nil {
		return fmt.Errorf("backup: fsync %s: %w", dir, err)
	}
	return nil
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
	if want.ServerTimeNS < m.Now() { // a backup's server time is at or after its state's (node.BackupPoint)
		return nil, fmt.Errorf("backup %s: %w", path, &FileError{Kind: &HeaderError{Kind: ErrCorrupt, Field: "server_time_ns",
			Got: fmt.Sprint(want.ServerTimeNS), Want: fmt.Sprintf("at least the state's server time %d", m.Now())}, Offset: int64(len(Magic)), Detail: "the header disagrees with the state"})
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
