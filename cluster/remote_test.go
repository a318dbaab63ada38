package cluster_test

import (
	"context"
	"net"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/cluster"
)

// remoteService is the tests' cluster.RemoteFunc, as the server's.
func remoteService(url string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) fence.Service {
	return client.NewService(url, client.WithDialer(dial), client.WithHeader(cluster.ForwardedHeader, "1"))
}
