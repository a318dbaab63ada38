package server

import (
	"context"
	"net"
	"net/http"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// LeaderService is the clusterapi.RemoteFunc of the leader forwarder: the
// remote fence.Service (client.NewService) of the node at url, over the
// connections dial opens, each call marked forwarded.
func LeaderService(url string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) fence.Service {
	return client.NewService(url, client.WithDialer(dial), client.WithHeader(clusterapi.ForwardedHeader, "1"),
		client.WithContextHeaders(forwardPrincipal))
}

// forwardPrincipal passes the principal this node authenticated on to the
// leader (which honours it on its peer port only).
func forwardPrincipal(ctx context.Context, h http.Header) {
	if p, ok := fence.PrincipalFrom(ctx); ok {
		h.Set(clusterapi.PrincipalHeader, p.Name)
		if p.Admin {
			h.Set(clusterapi.AdminHeader, "1")
		}
	}
}

var _ clusterapi.RemoteFunc = LeaderService
