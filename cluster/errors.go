package cluster

import "errors"

// ErrSingleNode refuses a membership change on a node started without a
// raft address: its raft runs over an in-memory transport that cannot reach
// another node, so there is nobody to add (restart it with --raft-addr and
// --bootstrap to make it the first node of a cluster).
var ErrSingleNode = errors.New("cluster: this node runs alone (no --raft-addr): its membership cannot change")
