package testutil

import (
	"context"
	"net"

	"github.com/fenceworks/fence/raftstore"
)

// DialPeerAPI opens a connection to the API side of the raft port at
// raftAddr, as a node forwarding a call to another does
// (raftstore.Mux.DialAPI): a test reaches a node as its peers do.
func DialPeerAPI(ctx context.Context, raftAddr string) (net.Conn, error) {
	c, err := new(net.Dialer).DialContext(ctx, "tcp", raftAddr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{raftstore.HeaderAPI}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
