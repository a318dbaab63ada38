package server

import (
	"context"
	"sync"
	"testing"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/cluster"
	"github.com/fenceworks/fence/internal/nodeview"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/state"
)

// testNodes are the nodes behind the servers newOverNode built.
var testNodes sync.Map // *Server → *node.Node

// nodeOf is the real node behind s.
func nodeOf(s *Server) *node.Node {
	n, _ := testNodes.Load(s)
	return n.(*node.Node)
}

// newOverNode builds a server over a new real single node (durable raft
// in a temp dir) that records rules (zero: state.DefaultConfig()), with
// its metrics and its membership (a cluster of one), as the daemon
// assembles them; the node closes at cleanup.
func newOverNode(tb testing.TB, cfg Config, rules state.Config) (*Server, error) {
	tb.Helper()
	if rules == (state.Config{}) {
		rules = state.DefaultConfig()
	}
	n, err := node.Open(node.Config{DataDir: tb.TempDir(), Logger: cfg.Logger, Rules: rules})
	if err != nil {
		return nil, err
	}
	m := cluster.NewMembership(n, cluster.Config{Logger: cfg.Logger})
	s, err := New(cfg, Deps{
		Service: n.Service(), Node: nodeview.Node{N: n}, Cluster: nodeview.Membership{M: m}, Auth: nodeview.Auth{N: n},
		Metrics: nodeview.Metrics(n),
		Changes: n.OnChanges,
		Errors: ErrorKinds{
			NotLeader: node.ErrNotLeader, UnknownOutcome: node.ErrUnknownOutcome, Closed: node.ErrClosed,
			ChangeRefused: nodeview.ChangeRefused, WatchBehind: node.ErrWatchBehind,
		},
		Watches: func(ctx context.Context, req *fencev1.WatchRequest) (WatchStream, error) {
			w, err := nodeview.Watches{N: n}.Watch(ctx, req)
			if err != nil {
				return nil, err
			}
			return w, nil
		},
	})
	if err != nil {
		n.Close()
		return nil, err
	}
	testNodes.Store(s, n)
	tb.Cleanup(func() {
		testNodes.Delete(s)
		if err := n.Close(); err != nil {
			tb.Errorf("closing the node: %v", err)
		}
	})
	return s, nil
}
