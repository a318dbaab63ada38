package raftstore

import (
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// Raft connections between nodes whose cluster ids are both known and
// differ are refused, both ways; a node without an id (new, joining)
// reaches and is reached by any; equal ids connect.
func TestRaftRefusedBetweenClusters(t *testing.T) {
	for _, c := range []struct {
		a, b string
		ok   bool
	}{{"x", "x", true}, {"x", "y", false}, {"", "y", true}, {"x", "", true}} {
		a, b := listenMux(t), listenMux(t)
		a.SetClusterID(func() string { return c.a })
		b.SetClusterID(func() string { return c.b })
		tb := quietTransport(b)
		var got atomic.Int64
		serveRaft(t, tb, &got)
		ta := quietTransport(a)
		var resp raft.AppendEntriesResponse
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte(ta.LocalAddr())}, Term: 1}
		err := ta.AppendEntries("b", raft.ServerAddress(b.Addr()), req, &resp)
		if c.ok && (err != nil || !resp.Success) {
			t.Fatalf("ids %q -> %q: %v %+v, want the RPC served", c.a, c.b, err, resp)
		}
		if !c.ok && (err == nil || got.Load() != 0) {
			t.Fatalf("ids %q -> %q: %v, %d served, want the connection refused", c.a, c.b, err, got.Load())
		}
		ta.Close()
		tb.Close()
	}
}
