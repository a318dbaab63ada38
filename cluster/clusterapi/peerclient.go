package clusterapi

import (
	"context"
	"net"
	"net/http"
	"time"
)

// peerPingEvery: a connection to a peer silent this long is pinged, and
// closed if the ping goes unanswered as long again, so calls to a peer cut
// off by a partition fail instead of waiting on a dead connection.
const peerPingEvery = 5 * time.Second

// PeerHTTPClient returns the HTTP/2 (cleartext) client nodes use to call
// one another: a request to http://RAFTADDR/... goes over a connection dial
// opens to RAFTADDR, so a node needs only another's raft address (what raft
// knows of its peers) to reach its API. Connections are kept and
// multiplexed (HTTP/2), one per peer.
func PeerHTTPClient(dial DialFunc) *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols: protocols,
		// addr is the URL's host:port: the peer's raft address. A peer cut
		// off by a partition does not hold a call for the OS's connect
		// timeout.
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, DialTimeout)
			defer cancel()
			return dial(ctx, addr)
		},
		HTTP2: &http.HTTP2Config{SendPingTimeout: peerPingEvery, PingTimeout: peerPingEvery},
	}}
}

// PeerURL is the base URL of the node at raftAddr for PeerHTTPClient.
func PeerURL(raftAddr string) string { return "http://" + raftAddr }
