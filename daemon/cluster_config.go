package daemon

import (
	"time"

	"github.com/fenceworks/fence/node"
)

// ClusterConfig makes the server one node of a raft cluster (package
// cluster). The zero value is a single node: raft over an in-memory
// transport, as `fence serve` and `make run` start it without raft flags.
type ClusterConfig struct {
	// RaftAddr is the TCP address of the raft port: raft's RPCs and,
	// multiplexed on the same port, the API as other nodes reach it
	// (forwarded calls, NodeStatus). Empty: a single node.
	RaftAddr string
	// RaftAdvertise is the raft address other nodes dial and the members
	// list shows; default RaftAddr (an unspecified host such as 0.0.0.0 is
	// refused: peers could not dial it).
	RaftAdvertise string
	// Bootstrap (first start only): a one-voter cluster of this node.
	Bootstrap bool
	// Peers (first start only): bootstrap this full voter set; every node
	// of a static cluster is given the same.
	Peers []node.Peer
	// Join (first start only, without Bootstrap or Peers): after the node
	// starts, ask these nodes (client URLs) to add it as a voter, until one
	// does or ReadyTimeout passes (Run then fails). A node that is already
	// a member (a restart with its data dir) asks nobody.
	Join []string
	// JoinAuthToken is the bearer secret (an admin token) the join's calls
	// carry, for a cluster with authentication enabled, where adding a
	// member needs an admin (fence serve takes it from FENCE_AUTH_TOKEN).
	JoinAuthToken string
	// Raft's timeouts; zero takes the node's defaults (LAN values in a
	// cluster, quick ones for a single node: see node.Config).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
}

// enabled reports cluster mode.
func (c ClusterConfig) enabled() bool { return c.RaftAddr != "" }
