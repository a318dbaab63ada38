package raftstore

import (
	"sync"

	"github.com/hashicorp/raft"
)

// transport is raft's NetworkTransport with one change: closing it closes
// every append pipeline it opened that is still open.
//
// hashicorp/raft (v1.7) can leave a pipelined replication blocked for
// good. A leader that hears of a newer term in a pipelined append's reply
// stops reading the pipeline's replies (pipelineDecode returns); the
// pipeline's decoder then waits to hand over its next reply, stops taking
// the appends in flight, and the replication goroutine's next send waits
// for it for ever. That goroutine closes the pipeline only after the send
// returns, and NetworkTransport.Close does not close pipelines, so
// raft.Shutdown — which waits for every raft goroutine — never returned:
// a node's Close hung (seen in the node package's cluster tests under
// load: a leader deposed by a leadership transfer, then closed). Closed
// here, the blocked send returns ErrPipelineShutdown and the goroutine
// ends. The node closes the transport as soon as it tells raft to shut
// down (node.Close).
type transport struct {
	*raft.NetworkTransport

	mu     sync.Mutex
	pipes  map[*pipeline]struct{}
	closed bool
}

func newTransport(nt *raft.NetworkTransport) *transport {
	return &transport{NetworkTransport: nt, pipes: map[*pipeline]struct{}{}}
}

// AppendEntriesPipeline opens a pipeline the transport closes when it is
// closed.
func (t *transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	wp := &pipeline{AppendPipeline: p, t: t}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		p.Close()
		return nil, raft.ErrTransportShutdown
	}
	t.pipes[wp] = struct{}{}
	t.mu.Unlock()
	return wp, nil
}

// Close closes every open pipeline, then the transport.
func (t *transport) Close() error {
	t.mu.Lock()
	t.closed = true
	pipes := t.pipes
	t.pipes = map[*pipeline]struct{}{}
	t.mu.Unlock()
	for p := range pipes {
		p.AppendPipeline.Close()
	}
	return t.NetworkTransport.Close()
}

// pipeline leaves its transport's set when raft closes it.
type pipeline struct {
	raft.AppendPipeline
	t *transport
}

func (p *pipeline) Close() error {
	p.t.mu.Lock()
	delete(p.t.pipes, p)
	p.t.mu.Unlock()
	return p.AppendPipeline.Close()
}
