package raftstore

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// refusalDialer counts the dials refused and signals the first.
type refusalDialer struct {
	d       net.Dialer
	refused atomic.Int64
	first   chan struct{}
}

func (r *refusalDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := r.d.DialContext(ctx, network, addr)
	if errors.Is(err, syscall.ECONNREFUSED) && r.refused.Add(1) == 1 {
		close(r.first)
	}
	return c, err
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A peer that is down (its port refuses) and comes back is reached by the
// RPC already waiting for it, not refused at once: hashicorp/raft backs
// off from a follower after every failed RPC, up to 10 s, and a follower
// restarted after some seconds down waited that long for its first entry
// (refusedPatience).
func TestDialWaitsForARefusingPeerToComeBack(t *testing.T) {
	d := &refusalDialer{first: make(chan struct{})}
	from := m2Transport(t, d, time.Hour)
	addr := freeAddr(t)

	errc := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte(from.LocalAddr())}, Term: 7}
		err := from.AppendEntries("b", raft.ServerAddress(addr), req, &resp)
		if err == nil && (!resp.Success || resp.Term != 7) {
			err = errors.New("answered without success")
		}
		errc <- err
	}()
	select {
	case <-d.first: // refused once: the peer is down
	case err := <-errc:
		t.Fatalf("AppendEntries to a peer that is down ended before its dial was refused: %v", err)
	}
	// The peer comes back on its address.
	to, err := Listen(addr, "")
	if err != nil {
		t.Skipf("the freed port was taken meanwhile: %v", err)
	}
	t.Cleanup(func() { to.Close() })
	var served atomic.Int64
	serveRaft(t, quietTransport(to), &served)
	if err := <-errc; err != nil {
		t.Fatalf("AppendEntries to a peer that came back: %v, want it answered", err)
	}
	if served.Load() != 1 {
		t.Fatalf("the peer served %d AppendEntries, want 1", served.Load())
	}
}

// A dial waiting for a refusing peer gives up when the transport closes:
// a node closing does not wait out raft's timeout for a peer that is down.
func TestDialForARefusingPeerEndsWithTheTransport(t *testing.T) {
	d := &refusalDialer{first: make(chan struct{})}
	from := m2Transport(t, d, time.Hour)
	addr := freeAddr(t)
	errc := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("a")}, Term: 1}
		errc <- from.AppendEntries("b", raft.ServerAddress(addr), req, &resp)
	}()
	<-d.first
	from.Close()
	if err := <-errc; err == nil {
		t.Fatal("AppendEntries to a peer that is down succeeded")
	}
}

// m2Transport is a transport over a new mux dialling through d, with
// raft's RPC timeout timeout.
func m2Transport(t *testing.T, d Dialer, timeout time.Duration) *transport {
	t.Helper()
	m := listenMux(t, WithDialer(d))
	return m.Transport(TransportConfig{Logger: hclog.NewNullLogger(), Timeout: timeout}).(*transport)
}
