package clusterapi

import "time"

// NodeStatus is one node's view of itself (Membership.NodeStatus): what
// the ClusterService's NodeStatus answers.
type NodeStatus struct {
	ID       string
	RaftAddr string // "" for a single node
	// Role is "leader", "follower", "candidate" or "shutdown".
	Role string
	// The leader this node knows of ("": none).
	LeaderID, LeaderAddr string
	// LastContact is the time since the last contact with the leader (a
	// follower); 0 when there was none to measure (the leader).
	LastContact                     time.Duration
	Term, CommitIndex, AppliedIndex uint64
	LastToken                       uint64
	// Ready: the node can serve (/readyz).
	Ready     bool
	ClusterID string
	// Counts of the node's applied state.
	Sessions, LeasesHeld, Waiters, Queued uint64
	// ServerTime is the leader clock in office, else the server time of
	// the last command applied.
	ServerTime time.Duration
	// Slack is how far expiry decisions lag the leader clock.
	Slack time.Duration
	// DataDirBytes is what the data dir takes (0 when unknown).
	DataDirBytes             uint64
	Resources, ResourceBytes uint64
	// OldestIDAge is the server-time age of the oldest remembered id.
	OldestIDAge time.Duration
	// The id memory: op_ids and request_id outcomes remembered, and one of
	// them at least 90% of its cap. SnapshotBytes: the last snapshot's size.
	RememberedOps, RememberedRequests uint64
	IDMemoryNearCap                   bool
	SnapshotBytes                     uint64
	// Fatal is the storage error that stopped the node, or "".
	Fatal   string
	Version string
	// InsecureListen: the node was started with --insecure-listen (it
	// may listen on a non-loopback address whose port speaks no TLS).
	InsecureListen bool
}

// Member is one member of a configuration, as a node lists it.
type Member struct {
	ID       string
	RaftAddr string
	Suffrage string // Voter or Nonvoter
	// Leader: the member leads, in the listing node's view.
	Leader bool
	// Status is what the member reports of itself; nil when it did not
	// answer, and Error says why.
	Status *NodeStatus
	Error  string
}

// MemberList is Members' answer: the members of the latest configuration
// the answering node knows.
type MemberList struct {
	Members    []Member
	AnsweredBy string // the id of the node that answered
}

// AddMemberRequest asks to add voter ID at RaftAddr. Fresh: the node
// asking has an empty data dir; JoinID is random, one per joining process
// (a retry of a fresh join carries the same).
type AddMemberRequest struct {
	ID, RaftAddr string
	Fresh        bool
	JoinID       string
}
