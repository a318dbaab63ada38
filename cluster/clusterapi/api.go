package clusterapi

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/fenceworks/fence"
)

// ForwardedHeader marks a call that a node passes on to its leader
// ("Fence-Forwarded: 1"). A node that gets such a call and does not lead
// answers it unavailable instead of passing it on again: a call makes at
// most one hop, so two nodes that each think the other leads cannot bounce
// it between them.
//
// The mark is honoured only on a call that came through the peer port (the
// raft port's API side; FromPeer): on the client port it is ignored, so a
// client cannot make a follower refuse its call instead of forwarding it.
const ForwardedHeader = "Fence-Forwarded"

// PrincipalHeader and AdminHeader carry, on a call a node forwards to its
// leader, the principal the forwarding node authenticated and whether it
// is an admin ("1"). Like ForwardedHeader they are honoured only on the
// peer port (FromPeer); on the client port they are ignored, and the
// caller is authenticated from its own credentials.
const (
	PrincipalHeader = "Fence-Principal"
	AdminHeader     = "Fence-Admin"
)

type peerKey struct{}

// WithPeer marks ctx as the context of a request that came through the
// peer port (the server sets it on those connections).
func WithPeer(ctx context.Context) context.Context { return context.WithValue(ctx, peerKey{}, true) }

// FromPeer reports a request that came through the peer port (WithPeer).
func FromPeer(ctx context.Context) bool {
	v, _ := ctx.Value(peerKey{}).(bool)
	return v
}

type peerNodeKey struct{}

// WithPeerNode records in ctx the node id the peer certificate of a peer
// port connection names (the server sets it with WithPeer under peer TLS).
func WithPeerNode(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, peerNodeKey{}, id)
}

// PeerNodeFrom is the node id WithPeerNode recorded ("" none: no peer TLS,
// or not the peer port).
func PeerNodeFrom(ctx context.Context) string {
	id, _ := ctx.Value(peerNodeKey{}).(string)
	return id
}

// DialFunc opens a connection to the Fence API of the node whose raft
// address is raftAddr (raftstore's Mux.DialAPI).
type DialFunc func(ctx context.Context, raftAddr string) (net.Conn, error)

// RemoteFunc returns the remote fence.Service of the node whose API is at
// url ("http://" and its raft address), whose connections dial opens (it
// ignores network and addr: the connection goes to that node), and every
// request of which carries the header ForwardedHeader: 1. The Service must
// return every field the remote node's Service answered (client.NewService
// with client.WithDialer and client.WithHeader is one); if it is an
// io.Closer, the Forwarder closes it when the leader changes.
type RemoteFunc func(url string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) fence.Service

// DialTimeout bounds the forwarder's connection attempt to the leader's
// raft port (the connection and its header byte); on a LAN it takes a
// millisecond.
const DialTimeout = 2 * time.Second

// Suffrage values of a Member.
const (
	Voter    = "voter"
	Nonvoter = "nonvoter"
)

// ErrSingleNode refuses a membership change on a node started without a
// raft address: its raft runs over an in-memory transport that cannot reach
// another node, so there is nobody to add (restart it with --raft-addr and
// --bootstrap to make it the first node of a cluster).
var ErrSingleNode = errors.New("cluster: this node runs alone (no --raft-addr): its membership cannot change")

// RefusedError is another node's refusal that no retry changes: an
// invalid id or address, a conflict, a node that runs alone. Err is the
// node's answer, as its Peer returned it.
type RefusedError struct {
	Err error
}

func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RefusedError) Unwrap() error { return e.Err }
