package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
)

// MemberFile marks, in a cluster member's data dir, that the dir has been
// part of a cluster: it holds raft state that other members count on (a
// term, a vote, acknowledged entries). It is written, and synced, before
// the first thing this node could answer a leader or a candidate with: a
// bootstrapping node writes it after its first configuration and before
// raft starts; a node waiting to be added writes it before its first
// stable-store write (raft saves a leader's or candidate's term before it
// answers any of their RPCs), and Open writes it for a dir that holds raft
// state without it (from a version before the file, or the file lost).
//
// A dir with the file and no raft term lost its log (wal/): such a node
// forgot its votes and the entries it acknowledged, and must not take part
// again under its old id in any start mode; Open refuses it
// (*LostMemberLogError). Before the file, a wal-less member started once
// with --join was replicated to by the leader that still listed it (which
// wrote a term), and a later start passed every check as a voter that
// could vote twice in a term.
const MemberFile = "MEMBER"

// LostMemberLogError: a cluster member's data dir records that it has been
// part of a cluster (MemberFile) but holds no raft term: its wal/ (the raft
// log and the stable store with its term and vote) was lost. Open refuses
// it whatever the start mode (Bootstrap, Peers, or join): the node forgot
// the votes it cast and the entries it acknowledged, so as a voter it could
// vote twice in one term or help elect a leader that lacks committed
// entries; bootstrapped again it would start a store whose tokens begin at 1.
type LostMemberLogError struct {
	Dir, NodeID string
}

func (e *LostMemberLogError) Error() string {
	return fmt.Sprintf("node: data dir %s has been a cluster member (it holds %s) but holds no raft term: its raft log and stable store (wal/) were lost, with the votes it cast and the entries it acknowledged. "+
		"It must not take part again as %s, in any start mode (--bootstrap, --join, --peers). Remove the member through another node (fence members remove %s), "+
		"empty this data dir (or give a new one) and start it with --join, as a new member; a single node or a lost cluster is restored from a backup (fence restore)",
		e.Dir, MemberFile, e.NodeID, e.NodeID)
}

// hasMemberFile reports whether dir holds MemberFile.
func hasMemberFile(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, MemberFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("node: read %s: %w", filepath.Join(dir, MemberFile), err)
}

// writeMemberFile records MemberFile in dir, durably.
func writeMemberFile(dir, id string) error {
	if err := writeFileSync(dir, MemberFile, id+"\n"); err != nil {
		return fmt.Errorf("node: record %s in %s: %w", MemberFile, dir, err)
	}
	return nil
}

// checkMember refuses a cluster member's dir that records MemberFile but
// holds no raft term (its wal/ lost); it runs before anything is
// bootstrapped or raft starts. A dir with raft state lacks no term: a
// bootstrap saves term 1 with the first configuration, and a node that
// was added saves its leader's term before it stores an entry.
func checkMember(cfg Config, stable raft.StableStore) (member bool, err error) {
	member, err = hasMemberFile(cfg.DataDir)
	if err != nil || !member {
		return member, err
	}
	term, err := stable.GetUint64([]byte("CurrentTerm")) // raft's keyCurrentTerm
	if err != nil && err.Error() != "not found" {
		return true, fmt.Errorf("node: read the current term: %w", err)
	}
	if term == 0 {
		return true, &LostMemberLogError{Dir: cfg.DataDir, NodeID: cfg.NodeID}
	}
	return true, nil
}

// memberMarkingStable is the stable store of a cluster member whose dir
// has no MemberFile yet (a node waiting to be added): its first write
// records the file first. raft writes the stable store before it answers
// anything — a leader's AppendEntries or InstallSnapshot, or a candidate's
// RequestVote, each carry a term above a new node's 0, which raft saves
// before it replies — so the file is durable before this node has told
// anyone anything. A crash between the file and the term leaves a dir that
// Open refuses though it answered nobody: refused on the safe side.
type memberMarkingStable struct {
	raft.StableStore
	dir, id string
	once    sync.Once
	err     error
}

func (s *memberMarkingStable) mark() error {
	s.once.Do(func() { s.err = writeMemberFile(s.dir, s.id) })
	return s.err
}

func (s *memberMarkingStable) Set(k, v []byte) error {
	if err := s.mark(); err != nil {
		return err
	}
	return s.StableStore.Set(k, v)
}

// SetUint64 marks before any value but 0: raft.NewRaft saves the term it
// read back at every start, 0 for a new node that has answered nobody.
func (s *memberMarkingStable) SetUint64(k []byte, v uint64) error {
	if v != 0 {
		if err := s.mark(); err != nil {
			return err
		}
	}
	return s.StableStore.SetUint64(k, v)
}
