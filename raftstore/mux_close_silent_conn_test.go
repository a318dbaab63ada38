package raftstore

import (
	"net"
	"testing"
	"time"
)

// Mux.Close closes every connection accepted but not yet handed out,
// including one still waiting for its header byte: a peer (or a port
// scanner) that connects and says nothing must not make a node's shutdown
// wait until that connection's header deadline (headerTimeout) ends it.
func TestMuxCloseDoesNotWaitForSilentConnection(t *testing.T) {
	m, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	dialed := time.Now() // before route can set the connection's header deadline
	silent, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Wait for the event, not a sleep: the mux holds the connection as
	// pending (accepted, header byte not read).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		m.mu.Lock()
		n := len(m.pending)
		m.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the mux never took the silent connection as pending")
		}
	}
	done := make(chan struct{})
	go func() { m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * headerTimeout):
		t.Fatalf("Mux.Close still blocked %s after the dial by a connection that sent no header byte", 2*headerTimeout)
	}
	// An ordering, not a speed bound: had Close waited for route, it could
	// only have returned once the header deadline (set after dialed) ended
	// the connection.
	if since := time.Since(dialed); since >= headerTimeout {
		t.Fatalf("Mux.Close returned %s after the dial, not before the header deadline (%s): it waited for the silent connection", since, headerTimeout)
	}
}
