package server

import (
	"context"
	"net"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/cluster"
)

// LeaderService is the cluster.RemoteFunc of the leader forwarder: the
// remote fence.Service (client.NewService) of the node at url, over the
// connections dial opens, each call marked forwarded.
func LeaderService(url string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) fence.Service {
	return client.NewService(url, client.WithDialer(dial), client.WithHeader(cluster.ForwardedHeader, "1"))
}

var _ cluster.RemoteFunc = LeaderService
