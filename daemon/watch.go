package daemon

import (
	"context"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/internal/nodeview"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/server"
)

// watchSource is n's watches as the server starts them
// (server.Deps.Watches).
func watchSource(n *node.Node) server.WatchSource {
	return func(ctx context.Context, req *fencev1.WatchRequest) (server.WatchStream, error) {
		w, err := nodeview.Watches{N: n}.Watch(ctx, req)
		if err != nil {
			return nil, err
		}
		return w, nil
	}
}
