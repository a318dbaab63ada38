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
}

func (e *ConflictError) Error() string {
	if e.OtherLeader != "" {
		return fmt.Sprintf("cluster: the node at %s belongs to another cluster (its leader is at %s): adding it would replace that cluster's state with this one's; stop it, empty its data dir and start it again to wait to be added", e.RaftAddr, e.OtherLeader)
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
