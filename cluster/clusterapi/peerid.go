package clusterapi

import (
	"context"
	"fmt"
	"net"
	"net/http/httptrace"
)

// PeerIdentity is implemented by a raft port connection under peer TLS
// (raftstore's): the node id the other side's certificate names.
type PeerIdentity interface{ PeerNodeID() string }

// PeerNodeID is the node id c's peer certificate names, looking through
// wrappers that have NetConn ("" without peer TLS).
func PeerNodeID(c net.Conn) string {
	for c != nil {
		switch x := c.(type) {
		case PeerIdentity:
			return x.PeerNodeID()
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return ""
		}
	}
	return ""
}

// TraceCertNodeID returns ctx with a trace that records, in *id, the node
// id the certificate of the connection a call over PeerHTTPClient went out
// on names ("" without peer TLS).
func TraceCertNodeID(ctx context.Context, id *string) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { *id = PeerNodeID(info.Conn) },
	})
}

// CertMismatchError: a node claims an id (its NodeStatus) that its peer
// certificate does not name.
type CertMismatchError struct {
	Claimed, CertID string
}

func (e *CertMismatchError) Error() string {
	return fmt.Sprintf("the node answers as %s but its peer certificate names %s: refused", e.Claimed, e.CertID)
}
