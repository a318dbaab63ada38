package cluster

import (
	"errors"
	"fmt"
)

// ConflictError refuses to add member ID at RaftAddr: member MemberID is at
// MemberAddr, and either the ids or the addresses are the same; or
// (NotMember) the node answering at RaftAddr is MemberID, not ID. Nothing
// was changed. To move a member to another address, remove it first.
type ConflictError struct {
	ID, RaftAddr         string
	MemberID, MemberAddr string
	NotMember            bool
	// Fresh: ID is a member, and the node asking to join as ID has an
	// empty data dir.
	Fresh bool
	// OtherLeader: the node at RaftAddr follows or leads another cluster,
	// whose leader is at this raft address.
	OtherLeader string
	// OtherCluster: the node at RaftAddr holds the state of another
	// cluster, whose cluster id this is (ClusterID: this cluster's) — a
	// node of the cluster a restore replaced, say, leader or not.
	OtherCluster, ClusterID string
	// NotEmpty: the node at RaftAddr holds raft state (Term: its term) and
	// reports no cluster id: neither an empty node waiting to be added nor
	// one of this cluster (an old node whose state is not applied before
	// a leader commits it, a node of an older version's log).
	NotEmpty bool
	Term     uint64
}

func (e *ConflictError) Error() string {
	if e.OtherLeader != "" {
		return fmt.Sprintf("cluster: the node at %s belongs to another cluster (its leader is at %s): adding it would replace that cluster's state with this one's; stop it, empty its data dir and start it again to wait to be added", e.RaftAddr, e.OtherLeader)
	}
	if e.OtherCluster != "" {
		return fmt.Sprintf("cluster: the node at %s belongs to another cluster (cluster id %s, this one is %s; a node of the cluster a restore replaced?): adding it would make a voter that refuses this cluster's leader; stop it, empty its data dir and start it again to wait to be added", e.RaftAddr, e.OtherCluster, e.ClusterID)
	}
	if e.NotEmpty {
		return fmt.Sprintf("cluster: the node at %s belongs to another cluster or to none this one knows (it holds raft state, term %d, and no cluster id: an old node whose state is not applied yet?): only an empty node or one of this cluster can be added; stop it, empty its data dir and start it again to wait to be added", e.RaftAddr, e.Term)
	}
	if e.Fresh {
		return fmt.Sprintf("cluster: %s is a member already, and the node joining as %s has an empty data dir (its data lost?): a voter that forgot its log and votes breaks raft's guarantees; remove it first (fence members remove %s), then join", e.ID, e.ID, e.ID)
	}
	if e.NotMember {
		return fmt.Sprintf("cluster: the node at %s is %s, not %s", e.RaftAddr, e.MemberID, e.ID)
	}
	if e.ID == e.MemberID {
		return fmt.Sprintf("cluster: %s is already a member at %s, not %s (two nodes with one --node-id? to move a member, remove it first)", e.ID, e.MemberAddr, e.RaftAddr)
	}
	return fmt.Sprintf("cluster: %s is already the raft address of member %s (remove %s first)", e.RaftAddr, e.MemberID, e.MemberID)
}

// ErrLastVoter refuses to remove the only voter: a configuration without
// voters can never elect a leader again.
var ErrLastVoter = errors.New("cluster: it is the last voter: a cluster without voters can never elect a leader again")
