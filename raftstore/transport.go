package raftstore

import (
	"context"
	"net"
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
// Addr(). raft.Shutdown closes it, which stops only the raft side: later
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
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &streamLayer{muxListener: muxListener{q: q, mux: m}},
		MaxPool: cfg.MaxPool,
		Timeout: cfg.Timeout,
		Logger:  cfg.Logger,
	})
}

// streamLayer is raft's view of the mux: the 'R' connections, and dials
// that send the 'R' header.
type streamLayer struct {
	muxListener
}

var _ raft.StreamLayer = (*streamLayer)(nil)

// Dial connects to a peer's raft port.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.mux.dial(ctx, string(address), HeaderRaft)
}
