package cluster

import (
	"net/http"

	"github.com/fenceworks/fence/cluster/clusterapi"
)

// The cluster's vocabulary lives in package clusterapi (no raft behind
// it), so that the server can speak it without linking a node; these are
// its names in this package.
type (
	NodeStatus       = clusterapi.NodeStatus
	Member           = clusterapi.Member
	MemberList       = clusterapi.MemberList
	AddMemberRequest = clusterapi.AddMemberRequest
	Peer             = clusterapi.Peer
	PeerFunc         = clusterapi.PeerFunc
	JoinFunc         = clusterapi.JoinFunc
	DialFunc         = clusterapi.DialFunc
	RemoteFunc       = clusterapi.RemoteFunc
	RefusedError     = clusterapi.RefusedError
)

// Suffrage values of a Member, the forwarded-call header, the dial bound
// and the refusal of a node that runs alone: see package clusterapi.
const (
	Voter           = clusterapi.Voter
	Nonvoter        = clusterapi.Nonvoter
	ForwardedHeader = clusterapi.ForwardedHeader
	DialTimeout     = clusterapi.DialTimeout
)

// ErrSingleNode: see clusterapi.ErrSingleNode.
var ErrSingleNode = clusterapi.ErrSingleNode

// PeerHTTPClient: see clusterapi.PeerHTTPClient.
func PeerHTTPClient(dial DialFunc) *http.Client { return clusterapi.PeerHTTPClient(dial) }
