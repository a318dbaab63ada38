package raftstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TransportConfig tunes the raft transport over a Mux.
type TransportConfig struct {
	// Logger receives the transport's logs (NewHCLogger adapts slog).
	Logger hclog.Logger
	// MaxPool is the number of idle connections kept per peer. Default 3.
	MaxPool int
	// Timeout bounds each RPC's I/O (raft scales it up for snapshot
	// installs). Default 10s.
	Timeout time.Duration
}

// Transport returns a raft transport (hashicorp/raft's NetworkTransport)
// over the mux: it accepts the port's 'R' connections and dials peers with
// the 'R' header (through the test dial map, if any). Its LocalAddr is
// Addr(). Closing it also closes the append pipelines it opened
// (pipeline.go). raft.Shutdown closes it, which stops only the raft side: later
// raft connections are refused until Transport is called again (a node
// reopened on the same mux). One transport at a time.
func (m *Mux) Transport(cfg TransportConfig) raft.Transport {
	if cfg.MaxPool <= 0 {
		cfg.MaxPool = 3
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	q := newConnQueue()
	m.mu.Lock()
	if m.raft != nil {
		m.raft.close()
	}
	m.raft = q
	m.mu.Unlock()
	layer := &streamLayer{q: q, mux: m, conns: map[*trackedConn]struct{}{}, done: make(chan struct{})}
	m.mu.Lock()
	m.layer = layer
	m.mu.Unlock()
	return newTransport(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: cfg.MaxPool,
		Timeout: cfg.Timeout,
		Logger:  cfg.Logger,
	}))
}

// streamLayer is raft's view of the mux: the 'R' connections, and dials
// that send the 'R' header. It keeps every connection it handed to raft:
// raft's NetworkTransport closes neither its pooled connections nor the
// ones it serves when it is closed, so without this a node closed in a
// running process would leave its peers' (and its own) connection
// goroutines waiting on them for good.
type streamLayer struct {
	q   *connQueue
	mux *Mux

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
	done   chan struct{} // closed by Close
}

// refusedPatience: hashicorp/raft backs off from a follower after each
// failed RPC, doubling from 10 ms up to 10.24 s (its replication's
// failureWait and maxFailureScale; only heartbeats are capped lower), and
// nothing cuts a back-off short. A dial that failed at once with
// "connection refused" counted a failure every few milliseconds while a
// follower was down, so a follower restarted after ~10 s or more found
// the leader asleep in its longest back-off: it knew the leader at once
// (heartbeats) but was sent nothing to apply for up to 10 s, unready all
// that time (an outside attack: 6-10 s after 12-25 s down). So a refused
// dial is tried again every dialRetry for as long as raft allows the call
// (TransportConfig.Timeout, 10 s): while a follower is down the leader
// counts one failure per timeout instead of one per back-off, and a
// follower that comes back is connected within dialRetry by the dial
// already waiting for it. A dial waiting so gives up when the transport
// closes (Node.Close closes it before it waits for raft's goroutines).
// Only "refused" waits: a peer that does not answer at all already takes
// the dial's whole timeout, and the test harness's fault dialers fail
// with errors of their own.
const dialRetry = 50 * time.Millisecond

var _ raft.StreamLayer = (*streamLayer)(nil)

// Accept hands raft the next 'R' connection.
func (s *streamLayer) Accept() (net.Conn, error) {
	l := muxListener{q: s.q, mux: s.mux}
	c, err := l.Accept()
	if err != nil {
		return nil, err
	}
	tc, err := s.track(c)
	if err != nil {
		return nil, err // not a nil *trackedConn in a non-nil net.Conn
	}
	return tc, nil
}

// Dial connects to a peer's raft port. A peer that refuses the connection
// (its process is down or restarting: nothing listens on the port) is
// dialled again every dialRetry until raft's timeout for the call, or
// until the transport closes (refusedPatience).
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var c net.Conn
	var err error
	for {
		c, err = s.mux.dialRaft(ctx, string(address))
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		t := time.NewTimer(dialRetry)
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		case <-s.done:
		}
		t.Stop()
		break
	}
	if err != nil {
		return nil, err
	}
	tc, err := s.track(c)
	if err != nil {
		return nil, err
	}
	tc.peer = string(address)
	return tc, nil
}

// Close stops accepting raft connections and closes every one handed out.
func (s *streamLayer) Close() error {
	s.q.close()
	s.mu.Lock()
	if !s.closed {
		close(s.done) // dials waiting for a peer that refused give up
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return nil
}

// Addr is the advertised raft address.
func (s *streamLayer) Addr() net.Addr { return advertisedAddr(s.mux.advertise) }

func (s *streamLayer) track(c net.Conn) (*trackedConn, error) {
	tc := &trackedConn{Conn: c, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, ErrMuxClosed
	}
	s.conns[tc] = struct{}{}
	return tc, nil
}

// trackedConn leaves its stream layer's set when closed. A connection it
// dialed (peer: the raft address) tells the mux's peer log that the peer
// answered whenever it reads from it (peerlog.go: a no-op unless a peer is
// logged unreachable).
type trackedConn struct {
	net.Conn
	s    *streamLayer
	peer string // dialed: the peer's raft address; accepted: ""
	once sync.Once
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.peer != "" {
		c.s.mux.peers.reached(c.peer)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}
