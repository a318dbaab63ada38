//go:build e2e

package system_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// cutProxy forwards TCP connections from a loopback port to target and,
// on cut, drops every connection it carries at once (both directions, as
// a lost network does, with no goodbye on the HTTP/2 level).
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	accept atomic.Int64
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accept.Add(1)
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.(*net.TCPConn).SetLinger(0) // RST, not FIN
		c.Close()
	}
	clear(p.conns)
}

// A session survives its connection being cut again and again in the
// middle of its stream: the client reconnects, resumes the same session
// and resends what was unanswered with the same seq. No lease is lost (each
// still releases with its token), no add is applied twice (the counter
// equals the adds acknowledged), and none is refused or lost.
func TestSessionResumesAcrossCutConnections(t *testing.T) {
	srv := startServer(t)
	proxy := startCutProxy(t, srv.Addr())
	c, err := client.New(proxy.URL(), client.WithSessionTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()

	var leases []*client.Lease
	for i := 0; i < 50; i++ {
		l, err := c.Acquire(ctx, "resume/"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	session := c.SessionID()
	if session == 0 {
		t.Fatal("leases acquired without a session")
	}

	// Adders on the first lease's token while the proxy cuts every
	// connection every 200ms.
	const adders, perAdder = 8, 150
	token := leases[0].Token()
	var acked atomic.Int64
	var failures []error
	var mu sync.Mutex
	stop := make(chan struct{})
	var cuts atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				proxy.cut()
				cuts.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	for a := 0; a < adders; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At least perAdder adds each, and on until the proxy has cut
			// the connection five times (a fast machine without -race
			// finishes perAdder before the first cut).
			for i := 0; (i < perAdder || cuts.Load() < 5) && ctx.Err() == nil; i++ {
				if _, err := c.Add(ctx, "resume/counter", token, 1); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					continue
				}
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)

	if cuts.Load() < 5 || proxy.accept.Load() < 2 {
		t.Fatalf("the connection was never cut under the adds (%d cuts, %d connections)", cuts.Load(), proxy.accept.Load())
	}
	if len(failures) > 0 {
		t.Fatalf("%d adds failed across the cuts; first: %v", len(failures), failures[0])
	}
	direct, err := client.New(srv.URL(), client.WithoutSession())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	r, err := direct.Read(ctx, "resume/counter")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.Value), itoa(uint64(acked.Load())); got != want || acked.Load() < adders*perAdder {
		t.Fatalf("counter = %s after %d acknowledged adds (at least %d sent, %d cuts): an add was applied twice or lost", got, acked.Load(), adders*perAdder, cuts.Load())
	}
	if id := c.SessionID(); id != session {
		t.Fatalf("session changed from %d to %d: it was not resumed", session, id)
	}
	for _, l := range leases {
		select {
		case <-l.Done():
			t.Fatalf("lease %s lost across the cuts: %v", l.Name(), l.Err())
		default:
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s with token %d: %v", l.Name(), l.Token(), err)
		}
	}
	t.Logf("%d adds across %d cuts and %d connections", acked.Load(), cuts.Load(), proxy.accept.Load())
}
