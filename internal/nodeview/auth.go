package nodeview

import (
	"context"

	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/state"
)

// Auth is a node as the server's AuthStore: the auth state of its replica,
// and auth commands proposed to it (a follower answers node.ErrNotLeader).
// Behind says why the node has not caught up with its cluster since it
// started (cluster.Membership.Behind); nil: always caught up.
type Auth struct {
	N      *node.Node
	Behind func() error
	// Past is cluster.Membership.PastThrough (nil: 0, nothing learned late).
	Past func() uint64
}

// PastThrough is the last log index this node learned late (Past).
func (v Auth) PastThrough() uint64 {
	if v.Past == nil {
		return 0
	}
	return v.Past()
}

func (v Auth) CaughtUp() error {
	if v.Behind == nil {
		return nil
	}
	return v.Behind()
}

func (v Auth) ReadAuth(f func(m *state.Machine)) { v.N.ReadState(f) }

// ReadStateAt reads the replica at the node's estimate of server time
// (node.Node.ReadStateAt; server.ServerTimeReader).
func (v Auth) ReadStateAt(f func(m *state.Machine, now int64)) { v.N.ReadStateAt(f) }

func (v Auth) ApplyAuth(ctx context.Context, cmd state.Command) (state.Result, error) {
	return v.N.Apply(ctx, cmd)
}

func (v Auth) AuthEnabled() bool { return v.N.AuthEnabled() }
