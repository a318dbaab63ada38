package server

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// ClusterPeers reaches other nodes' ClusterService for package cluster
// (cluster.Config's Peer and Join): over their raft ports by raft address,
// and at --join URLs over their client ports.
type ClusterPeers struct {
	raft *http.Client // nil alone
	join *http.Client
	// JoinAuthToken, if set, is sent as a bearer token with the calls to
	// --join URLs (client ports: with authentication enabled, adding a
	// member needs an admin).
	JoinAuthToken string
}

func NewClusterPeers(dial clusterapi.DialFunc) *ClusterPeers {
	p := &ClusterPeers{join: &http.Client{}}
	if dial != nil {
		p.raft = clusterapi.PeerHTTPClient(dial)
	}
	return p
}

// peer is the clusterapi.PeerFunc: the node at raftAddr, over its raft port.
func (p *ClusterPeers) Peer(raftAddr string, forwarded bool) clusterapi.Peer {
	var opts []connect.ClientOption
	if forwarded {
		opts = append(opts, connect.WithInterceptors(forwardedMark{}))
	}
	return connectPeer{fencev1connect.NewClusterServiceClient(p.raft, "http://"+raftAddr, opts...)}
}

// joinPeer is the clusterapi.JoinFunc: the node at a --join URL.
func (p *ClusterPeers) JoinPeer(url string) clusterapi.Peer {
	var opts []connect.ClientOption
	if p.JoinAuthToken != "" {
		auth := "Bearer " + p.JoinAuthToken
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", auth)
				return next(ctx, req)
			}
		})))
	}
	return connectPeer{fencev1connect.NewClusterServiceClient(p.join, url, opts...)}
}

// close closes idle connections to other nodes.
func (p *ClusterPeers) Close() {
	if p.raft != nil {
		p.raft.CloseIdleConnections()
	}
	p.join.CloseIdleConnections()
}

// connectPeer is a clusterapi.Peer over a ClusterService client. An error is
// the *connect.Error the call returned (the node's answer, passed on as
// is by a node forwarding a change), wrapped in a *clusterapi.RefusedError
// when its code says no retry changes it.
type connectPeer struct {
	c fencev1connect.ClusterServiceClient
}

func peerErr(err error) error {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
		return &clusterapi.RefusedError{Err: err}
	}
	return err
}

// NodeStatus asks the node for its status. Under peer TLS the id it
// answers with must be the one its certificate names (a node is the node
// its certificate names): otherwise a *clusterapi.RefusedError wrapping a
// *clusterapi.CertMismatchError, so a leader about to add it refuses.
func (p connectPeer) NodeStatus(ctx context.Context, adding bool) (clusterapi.NodeStatus, error) {
	var certID string
	res, err := p.c.NodeStatus(clusterapi.TraceCertNodeID(ctx, &certID), connect.NewRequest(&fencev1.NodeStatusRequest{Adding: adding}))
	if err != nil {
		return clusterapi.NodeStatus{}, peerErr(err)
	}
	st := nodeStatusFromProto(res.Msg)
	if certID != "" && certID != st.ID {
		return clusterapi.NodeStatus{}, &clusterapi.RefusedError{Err: &clusterapi.CertMismatchError{Claimed: st.ID, CertID: certID}}
	}
	return st, nil
}

func (p connectPeer) AddMember(ctx context.Context, req clusterapi.AddMemberRequest) error {
	_, err := p.c.AddMember(ctx, connect.NewRequest(&fencev1.AddMemberRequest{Id: req.ID, RaftAddr: req.RaftAddr, Fresh: req.Fresh, JoinId: req.JoinID}))
	if err != nil {
		return peerErr(err)
	}
	return nil
}

func (p connectPeer) RemoveMember(ctx context.Context, id string) (bool, error) {
	res, err := p.c.RemoveMember(ctx, connect.NewRequest(&fencev1.RemoveMemberRequest{Id: id}))
	if err != nil {
		return false, peerErr(err)
	}
	return res.Msg.GetWasMember(), nil
}

func (p connectPeer) TransferLeadership(ctx context.Context, id string) (string, error) {
	res, err := p.c.TransferLeadership(ctx, connect.NewRequest(&fencev1.TransferLeadershipRequest{Id: id}))
	if err != nil {
		return "", peerErr(err)
	}
	return res.Msg.GetLeader(), nil
}

// forwardedMark sets clusterapi.ForwardedHeader on unary calls.
type forwardedMark struct{}

func (forwardedMark) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set(clusterapi.ForwardedHeader, "1")
		return next(ctx, req)
	}
}

func (forwardedMark) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (forwardedMark) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

var (
	_ clusterapi.PeerFunc = (*ClusterPeers)(nil).Peer
	_ clusterapi.JoinFunc = (*ClusterPeers)(nil).JoinPeer
)
