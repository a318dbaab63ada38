package server

import (
	"context"
	"net"

	"github.com/fenceworks/fence/cluster/clusterapi"
)

// peerListener marks the connections of the peer port (ServePeers), so
// that the requests served over them, and only those, are served as from a
// peer: the forwarded mark a client sets on the client port means nothing.
type peerListener struct{ net.Listener }

type peerConn struct{ net.Conn }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{c}, nil
}

// markPeerConn is the http.Server's ConnContext: a peer connection's
// requests carry clusterapi.WithPeer, and under peer TLS the node id its
// certificate names (clusterapi.WithPeerNode).
func markPeerConn(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(peerConn); ok {
		ctx = clusterapi.WithPeer(ctx)
		if id := clusterapi.PeerNodeID(pc.Conn); id != "" {
			ctx = clusterapi.WithPeerNode(ctx, id)
		}
	}
	return ctx
}
