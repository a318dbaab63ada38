package nodeview

import (
	"context"
	"errors"

	"github.com/fenceworks/fence/cluster"
)

// Membership is cluster.Membership as the server's ClusterService calls it
// (it implements server.Membership): a change carries whether another node
// forwarded it (cluster.ForwardedHeader), so the leader's answer is never
// forwarded again.
type Membership struct{ M *cluster.Membership }

func (v Membership) Members(ctx context.Context) (cluster.MemberList, error) {
	return v.M.Members(ctx)
}

func (v Membership) AddMember(ctx context.Context, id, raftAddr string, fresh bool, joinID string) error {
	return v.M.AddMember(ctx, cluster.IsForwarded(ctx), id, raftAddr, fresh, joinID)
}

func (v Membership) RemoveMember(ctx context.Context, id string) (bool, error) {
	return v.M.RemoveMember(ctx, cluster.IsForwarded(ctx), id)
}

func (v Membership) TransferLeadership(ctx context.Context, id string) (string, error) {
	return v.M.TransferLeadership(ctx, cluster.IsForwarded(ctx), id)
}

func (v Membership) NodeStatus(adding bool) cluster.NodeStatus {
	return v.M.NodeStatus(adding)
}

// ChangeRefused reports a membership change refused for good: a single
// node, the last voter, a member conflicting with the one added
// (server.ErrorKinds.ChangeRefused).
func ChangeRefused(err error) bool {
	return errors.Is(err, cluster.ErrSingleNode) || errors.Is(err, cluster.ErrLastVoter) || errors.As(err, new(*cluster.ConflictError))
}
