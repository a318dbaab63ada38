package raftstore

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Closing the transport ends an append blocked in a pipeline whose replies
// nobody reads any more: raft stops reading them when a reply names a
// newer term, and then its replication goroutine's next send waits for
// ever (pipeline.go). Without the transport closing its pipelines, raft's
// Shutdown, which waits for that goroutine, never returned.
func TestTransportCloseEndsABlockedPipelineSend(t *testing.T) {
	m1, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	m2, err := Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	t1 := m1.Transport(TransportConfig{Logger: hclog.NewNullLogger(), Timeout: time.Hour})
	t2 := m2.Transport(TransportConfig{Logger: hclog.NewNullLogger(), Timeout: time.Hour})
	defer t2.(raft.WithClose).Close()
	go func() { // the peer answers every append
		for rpc := range t2.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()

	p, err := t1.AppendEntriesPipeline("n2", raft.ServerAddress(m2.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads p.Consumer(), as after raft's pipelineDecode returned:
	// the first reply is decoded and waits to be handed over; the next
	// append waits for the decoder, for ever.
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte(m1.Addr())}, Term: 1}
	if _, err := p.AppendEntries(req, &raft.AppendEntriesResponse{}); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := p.AppendEntries(req, &raft.AppendEntriesResponse{})
		sent <- err
	}()
	for deadline := time.Now().Add(time.Minute); !blockedIn("raft.(*netPipeline).AppendEntries("); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second append never blocked on the pipeline")
		}
	}

	t1.(raft.WithClose).Close()
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("the blocked append succeeded after the transport closed")
		}
	case <-time.After(time.Minute): // hang guard
		t.Fatal("closing the transport left the pipelined append blocked")
	}
}

// blockedIn reports whether a goroutine of this process is blocked in a
// select inside fn.
func blockedIn(fn string) bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}
