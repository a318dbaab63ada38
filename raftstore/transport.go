package raftstore

import (
	"context"
	"net"
	"sync"
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
	layer := &streamLayer{q: q, mux: m, conns: map[*trackedConn]struct{}{}}
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
}

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

// Dial connects to a peer's raft port.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.mux.dialRaft(ctx, string(address))
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
