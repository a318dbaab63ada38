package node

import (
	"strings"
	"testing"
	"time"
)

// A node closes without waiting on a peer that stopped answering: its
// raft transport is closed as soon as raft is told to shut down, so an
// RPC blocked on the silent peer (the heartbeat to it, a replication)
// fails at once instead of holding the close — and the transport, whose
// connection handlers would go on taking RPCs for a raft that no longer
// reads them — until the RPC's I/O timeout. Here that timeout is five
// minutes (5 × a one-minute election timeout), far beyond the hang guard;
// hashicorp/raft's own shutdown closes the transport only after every
// raft goroutine has returned.
func TestCloseDoesNotWaitOnAStalledPeer(t *testing.T) {
	t.Parallel() // a cluster of its own
	tc := startCluster(t, clusterOpts{n: 3, links: true})
	l := tc.members[0]
	// l restarts with a one-minute election timeout (its RPC I/O
	// timeout becomes five minutes) and is made leader.
	tc.kill(l)
	l.cfg.ElectionTimeout = time.Minute
	tc.open(l)
	tc.transferTo(l)
	grant(t, l.node, "x")

	// The link l→a goes silent: l's connections to a stay open, and
	// nothing l sends reaches a (nor any answer l).
	link := tc.proxies.link(0, 1)
	link.setStalled(true)
	defer link.setStalled(false)
	// The event: a heartbeat of l is waiting for an answer (a pipelined
	// append held on the link does not hold raft's shutdown; the
	// heartbeat, a plain RPC, does).
	waitUntil(t, "a heartbeat from l to a is held on the stalled link", func() bool {
		return link.heldReads() > 0 && heartbeatInRPC()
	})

	var err error
	if !within(t, "close the node whose peer stopped answering", func() { err = l.node.close(false) }) {
		t.FailNow()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// heartbeatInRPC reports whether a goroutine of this process is a raft
// heartbeat waiting on its RPC.
func heartbeatInRPC() bool {
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if strings.Contains(g, "raft.(*Raft).heartbeat(") && strings.Contains(g, "genericRPC(") {
			return true
		}
	}
	return false
}
