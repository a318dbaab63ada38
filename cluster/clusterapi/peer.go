package clusterapi

import "context"

// Peer is another node's membership API (its ClusterService) as this node
// calls it. An error is the other node's answer or why none came; a
// refusal no retry changes (an invalid id or address, a conflict, a node
// that runs alone) is a *RefusedError.
type Peer interface {
	// NodeStatus asks for the node's status; adding tells it a leader is
	// about to add it (see Membership.WatchFresh).
	NodeStatus(ctx context.Context, adding bool) (NodeStatus, error)
	AddMember(ctx context.Context, req AddMemberRequest) error
	RemoveMember(ctx context.Context, id string) (wasMember bool, err error)
	TransferLeadership(ctx context.Context, id string) (leader string, err error)
}

// PeerFunc returns the Peer of the node whose raft address is raftAddr,
// reached over its raft port (PeerHTTPClient); forwarded: each call
// carries ForwardedHeader: 1 (a change passed on to the leader).
type PeerFunc func(raftAddr string, forwarded bool) Peer

// JoinFunc returns the Peer of the node whose client URL is url (a --join
// URL): Join asks it to add this node.
type JoinFunc func(url string) Peer
