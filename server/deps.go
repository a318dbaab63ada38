package server

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/state"
)

// Deps are what a server serves over. Service and Node are required; the
// daemon package supplies a node's, a test fakes them.
type Deps struct {
	// Service answers the API's lock, resource and session calls. The
	// handlers validate every request before they call it, and map its
	// errors (a refusal to its code and detail; Errors' kinds and
	// fence.ErrUnavailable to Unavailable).
	Service fence.Service
	// Node is the node behind the server as readiness, the backup and the
	// TTL bound see it.
	Node Node
	// Cluster answers the ClusterService; nil leaves it unmounted.
	Cluster Membership
	// Errors names the errors of the parts behind Service and Cluster that
	// the handlers answer specially.
	Errors ErrorKinds
	// Metrics are registered in the server's registry beside its own and
	// served on /metrics (the node's gauges and counters).
	Metrics []prometheus.Collector
	// Auth is the auth state (auth.go); nil serves every call as an
	// admin's, as before authentication existed.
	Auth AuthStore
	// PeerAdmitted, if set, reports whether the node a peer port
	// connection's certificate names may be served as a peer now
	// (raftstore.Mux.AdmitsPeer: a member of the configuration). It is
	// asked at every call through the peer port (peer_gate.go); nil: no
	// check (no peer TLS: the raft port is loopback or a private network's).
	PeerAdmitted func(nodeID string) bool
	// Watches serves LockService.Watch and GET /v1/watch (watch.go); nil
	// answers both unimplemented.
	Watches WatchSource
	// Changes, if set, registers the function the node's applied changes
	// are to be handed to (node.Node.OnChanges): the operator view's
	// stories and grant counts are fed so (story.go, activity.go). nil:
	// both stay empty.
	Changes func(fn func(index uint64, cs []state.Change))
	// Middleware, if set, wraps the whole API handler (on every port it is
	// served on).
	Middleware func(http.Handler) http.Handler
}

// Node is what the server reads of the node behind it.
type Node interface {
	// Readiness reports whether the node can serve (/readyz, gRPC health):
	// a leader in office that applied all it committed, or a follower that
	// knows its leader and applied all it knows committed. detail is the
	// one line /readyz shows after "ready: " or "not ready: ".
	Readiness() (ready bool, detail string)
	// IsLeader reports whether the node is its cluster's leader in office
	// (a single node: always). A session's keepalive reply says so
	// (KeepAliveResponse.follower), so that a client on a follower can
	// move to the leader.
	IsLeader() bool
	// Limits are the request bounds of the rules recorded in the log (the
	// largest TTL and lock-delay); MaxTTL 0 if none are known yet
	// (Config.MaxTTL applies then).
	Limits() fence.Limits
	// Backup copies the node's state as of one applied index and returns
	// the header's facts and the function that writes the backup file. An
	// error that is not a *connect.Error is mapped as a Service error.
	Backup(ctx context.Context) (*fencev1.BackupHeader, func(io.Writer) error, error)
}

// WatchSource starts a watch on the node's applied state (node.Watch seen
// through the daemon): following what req names. A malformed after is a
// *fence.InvalidError naming it.
type WatchSource func(ctx context.Context, req *fencev1.WatchRequest) (WatchStream, error)

// WatchStream is one watch: Next returns its next events (the state
// first, then changes, in log order), waiting until there is one or ctx
// ends; an error matching ErrorKinds.WatchBehind means the watch fell
// behind the node's ring and is cut.
type WatchStream interface {
	Next(ctx context.Context) ([]*fencev1.WatchEvent, error)
	Close()
}

// EventShare is what every watch a change goes to shares: the change's
// encodings, one a slot (a wire format, redacted or not), each made by
// the first watch that needs it and never changed after (node.WatchShare).
type EventShare = interface {
	Load(slot int) []byte
	Store(slot int, b []byte)
}

// SharedWatchStream is a WatchStream whose changes carry an EventShare:
// Shared(i) is the i-th event of the last Next's (nil: not shared).
type SharedWatchStream interface {
	WatchStream
	Shared(i int) EventShare
}

// Membership is the ClusterService's logic: package cluster's Membership
// seen through the daemon (which knows whether a call was forwarded).
type Membership interface {
	Members(ctx context.Context) (clusterapi.MemberList, error)
	AddMember(ctx context.Context, id, raftAddr string, fresh bool, joinID string) error
	RemoveMember(ctx context.Context, id string) (wasMember bool, err error)
	TransferLeadership(ctx context.Context, id string) (leader string, err error)
	NodeStatus(adding bool) clusterapi.NodeStatus
}

// ErrorKinds are the errors of the node and the cluster that the handlers
// tell apart. A nil field matches nothing.
type ErrorKinds struct {
	// NotLeader: the node does not lead; nothing was proposed
	// (Unavailable, logged as a NOT_LEADER refusal).
	NotLeader error
	// UnknownOutcome: the command may or may not be applied (Unavailable,
	// logged at warn: the client retries with the same id).
	UnknownOutcome error
	// Closed: the node is shut down (Unavailable, "server is shutting
	// down").
	Closed error
	// ChangeRefused reports a membership change refused for good (a single
	// node, the last voter, a conflicting member): FailedPrecondition, not
	// logged.
	ChangeRefused func(error) bool
	// WatchBehind: a watch read more slowly than the changes came and
	// the node's ring moved past it (the watch is cut, counted in
	// fence_watch_cut_total).
	WatchBehind error
}

// is reports whether err matches kind (never for a nil kind).
func is(err, kind error) bool { return kind != nil && errors.Is(err, kind) }
