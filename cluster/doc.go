// Package cluster is what turns nodes into a cluster, above the node: the
// membership API (ClusterService) over raft's own configuration changes,
// joining a running cluster (--join), the HTTP/2 client nodes use to call
// one another over the raft port, and the leader forwarder (Forwarder) that
// serves fence.Service on any node by sending calls to the leader.
//
// # Types, and the wire given as functions
//
// The package speaks domain types: fence.Service for the API, and its own
// NodeStatus, Member, MemberList and AddMemberRequest for membership. It
// imports neither the API's generated code nor a client of it: what
// crosses the wire is given to it as functions by the package that serves
// the API — a RemoteFunc that makes the leader's remote fence.Service
// (client.NewService), a PeerFunc and a JoinFunc that make another node's
// membership API (Peer). A forwarded call returns exactly what the leader
// answered, every field of it (the conformance table checks a follower's
// answers against the leader's, field by field). A peer's refusal that no
// retry changes is a *RefusedError.
//
// # Membership
//
// A cluster's members are raft's configuration: voters (and non-voters,
// which Fence never adds itself). Membership answers the ClusterService:
//
//   - Members is answered by the node asked, from the latest configuration
//     it knows (committed or not), and each member reports its own status
//     (NodeStatus over the raft port, with a short timeout: a member that
//     does not answer is listed with its error, not left out). So `fence
//     members` works on a minority side too, where it matters most.
//   - AddMember, RemoveMember and TransferLeadership change the
//     configuration through raft (AddVoter, RemoveServer,
//     LeadershipTransferToServer) on the leader. A follower forwards them to
//     the leader it knows, over the leader's raft port, marked with
//     ForwardedHeader; a node that gets a forwarded call and does not lead
//     answers unavailable (one hop, no loops). A node that knows no leader
//     (an election under way) waits a few seconds for one before it
//     answers unavailable. Every change is idempotent
//     (adding a voter that is one, removing an id that is not a member),
//     so a caller may retry one whose outcome it did not learn. Adding an
//     id that is a member at another address, or at the address of another
//     member, is refused (ConflictError): raft would take it for a move, so
//     a second node started with an id in use would take the first's place.
//     A node that is not a member is asked for its status first and added
//     only if it answers as id, knows no other leader, and is empty (no
//     cluster id, no raft state) or of this cluster (its cluster id is the
//     leader's); else ConflictError (OtherLeader, OtherCluster, NotEmpty):
//     a node of another cluster made a voter here never acknowledges, and
//     the quorum it joins may never commit again (checkJoinerState).
//   - NodeStatus is the asked node's own view, never forwarded. A leader
//     about to add a node asks it with adding set (from the raft port
//     only), which admits a node that started empty to answer raft
//     (node.Config.AdmitOnAdd): until then it refuses every raft RPC, so
//     a leader that lists its id already (its data dir lost) cannot make
//     an empty voter of it.
//
// A single node (started without --raft-addr: raft over an in-memory
// transport) lists itself and refuses changes (ErrSingleNode): it cannot
// reach a new member.
//
// # Joining
//
// A node started with --join and no raft state starts empty (not a member
// of any configuration, so it neither votes nor stands) and asks the given
// URLs, in turn, to add it as a voter (Membership.Join), until one does or
// its context ends. A node that is already a member (a restart with its
// data dir) does not ask.
package cluster
