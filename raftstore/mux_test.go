package raftstore

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func listenMux(t *testing.T, opts ...MuxOption) *Mux {
	t.Helper()
	m, err := Listen("127.0.0.1:0", "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func quietTransport(m *Mux) *transport {
	return m.Transport(TransportConfig{Logger: hclog.NewNullLogger(), Timeout: 5 * time.Second}).(*transport)
}

// serveRaft answers every AppendEntries arriving on trans with Success and
// the request's term, and counts them.
func serveRaft(t *testing.T, trans raft.Transport, count *atomic.Int64) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case rpc := <-trans.Consumer():
				req, ok := rpc.Command.(*raft.AppendEntriesRequest)
				if !ok {
					rpc.Respond(nil, errors.New("unexpected rpc"))
					continue
				}
				count.Add(1)
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done); wg.Wait() })
}

func appendEntries(t *testing.T, from raft.Transport, to *Mux, term uint64) {
	t.Helper()
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte(from.LocalAddr())}, Term: term}
	if err := from.AppendEntries("b", raft.ServerAddress(to.Addr()), req, &resp); err != nil {
		t.Fatalf("AppendEntries to %s: %v", to.Addr(), err)
	}
	if !resp.Success || resp.Term != term {
		t.Fatalf("AppendEntries answered %+v, want success in term %d", resp, term)
	}
}

// echoAPI accepts API connections on m and echoes each back.
func echoAPI(t *testing.T, m *Mux) net.Listener {
	t.Helper()
	ln := m.APIListener()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln
}

func echoOnce(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if string(buf) != msg {
		t.Fatalf("echo = %q, want %q", buf, msg)
	}
}

// One port carries raft RPCs and API connections side by side.
func TestMuxRaftAndAPIOnOnePort(t *testing.T) {
	a, b := listenMux(t), listenMux(t)
	ta, tb := quietTransport(a), quietTransport(b)
	defer ta.Close()
	defer tb.Close()
	if string(ta.LocalAddr()) != a.Addr() {
		t.Fatalf("transport LocalAddr %q, mux Addr %q", ta.LocalAddr(), a.Addr())
	}
	var got atomic.Int64
	serveRaft(t, tb, &got)
	echoAPI(t, b)

	appendEntries(t, ta, b, 7)
	c, err := a.DialAPI(context.Background(), b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoOnce(t, c, "hello over the API side")
	appendEntries(t, ta, b, 8) // raft still served while an API conn is open
	if got.Load() != 2 {
		t.Fatalf("raft side saw %d AppendEntries, want 2", got.Load())
	}
}

// A connection with an unknown header byte is closed, and one that sends
// nothing holds up no other connection.
func TestMuxUnknownAndSilentConnections(t *testing.T) {
	m := listenMux(t)
	echoAPI(t, m)
	silent, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	bad, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := bad.Read(make([]byte, 16)); err == nil {
		t.Fatalf("a connection with header 'G' was answered (%d bytes), want it closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection with header 'G' was left open")
	}
	c, err := m.DialAPI(context.Background(), m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoOnce(t, c, "not held up by the silent one")
}

// The test dial map sends every outgoing dial, raft and API, to a mapped
// address through the proxy there; the advertised address is unchanged.
func TestMuxDialMap(t *testing.T) {
	b := listenMux(t)
	tb := quietTransport(b)
	defer tb.Close()
	var got atomic.Int64
	serveRaft(t, tb, &got)
	echoAPI(t, b)

	proxy, proxied := startProxy(t, b.Addr())
	a := listenMux(t, WithDialer(MapDialer{b.Addr(): proxy}))
	ta := quietTransport(a)
	defer ta.Close()

	appendEntries(t, ta, b, 3)
	c, err := a.DialAPI(context.Background(), b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoOnce(t, c, "through the proxy")
	if n := proxied.Load(); n != 2 {
		t.Fatalf("proxy carried %d connections, want 2 (one raft, one API)", n)
	}

	// An unmapped address is dialed directly.
	c2, err := a.DialAPI(context.Background(), a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if n := proxied.Load(); n != 2 {
		t.Fatalf("proxy carried %d connections after a dial to an unmapped address, want 2", n)
	}
}

// startProxy forwards TCP connections to target and counts them.
func startProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, up)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), &n
}

// Closing the raft side (raft.Shutdown closes its transport) leaves the API
// side serving; closing the API listener leaves raft serving; closing the
// mux ends both listeners with an error wrapping net.ErrClosed.
func TestMuxCloseSides(t *testing.T) {
	a, b := listenMux(t), listenMux(t)
	ta := quietTransport(a)
	defer ta.Close()
	tb := quietTransport(b)
	var got atomic.Int64
	serveRaft(t, tb, &got)
	apiLn := echoAPI(t, b)

	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := a.DialAPI(context.Background(), b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	echoOnce(t, c, "api after raft closed")
	c.Close()

	// A new transport on the same mux (a node reopened) serves raft again.
	tb2 := quietTransport(b)
	defer tb2.Close()
	serveRaft(t, tb2, &got)
	apiLn.Close()
	appendEntries(t, ta, b, 1)
	if got.Load() != 1 {
		t.Fatalf("second transport saw %d RPCs, want 1", got.Load())
	}

	ln := b.APIListener()
	errc := make(chan error, 1)
	go func() { _, err := ln.Accept(); errc <- err }()
	b.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after the mux closed")
	}
	if _, err := b.DialAPI(context.Background(), a.Addr()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("DialAPI on a closed mux: %v, want net.ErrClosed", err)
	}
}

func TestListenAdvertise(t *testing.T) {
	if _, err := Listen("0.0.0.0:0", ""); err == nil {
		t.Fatal("an unspecified bound address without advertise was accepted")
	}
	m, err := Listen("0.0.0.0:0", "node-a.example:7100")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Addr() != "node-a.example:7100" {
		t.Fatalf("Addr = %q", m.Addr())
	}
	tr := m.Transport(TransportConfig{Logger: hclog.NewNullLogger()})
	defer tr.(*transport).Close()
	if tr.LocalAddr() != "node-a.example:7100" {
		t.Fatalf("transport LocalAddr = %q, want the advertised address", tr.LocalAddr())
	}
	for _, bad := range []string{"nohost", ":7100", "h:0", "[::]:7100"} {
		if m, err := Listen("127.0.0.1:0", bad); err == nil {
			m.Close()
			t.Errorf("advertise %q accepted", bad)
		}
	}
}

func TestParseDialMap(t *testing.T) {
	m, err := ParseDialMap(" 127.0.0.1:1=127.0.0.1:9, 127.0.0.1:2=127.0.0.1:8 ")
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 2 || m["127.0.0.1:1"] != "127.0.0.1:9" || m["127.0.0.1:2"] != "127.0.0.1:8" {
		t.Fatalf("got %v", m)
	}
	if m, err := ParseDialMap(""); err != nil || m != nil {
		t.Fatalf("empty: %v %v", m, err)
	}
	for _, bad := range []string{"a", "a=", "=b", "a=b,a=c", "a=b,,c=d"} {
		if _, err := ParseDialMap(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Closing a transport closes the connections its stream layer handed to
// raft (raft's NetworkTransport closes none of them itself): a peer's
// connection to a closed node ends instead of waiting forever.
func TestTransportCloseClosesItsConnections(t *testing.T) {
	a, b := listenMux(t), listenMux(t)
	tb := quietTransport(b)
	var got atomic.Int64
	serveRaft(t, tb, &got)
	ta := quietTransport(a)
	defer ta.Close()
	appendEntries(t, ta, b, 1) // b now serves an inbound raft connection from a's pool

	raw, err := a.dial(context.Background(), b.Addr(), []byte{HeaderRaft})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Wait until b's raft side holds both: the pooled one and raw.
	b.mu.Lock()
	layer := b.layer
	b.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		layer.mu.Lock()
		n := len(layer.conns)
		layer.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's raft side holds %d connections, want 2", n)
		}
		time.Sleep(time.Millisecond)
	}
	tb.Close()
	raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = raw.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a raft connection to a closed transport stayed open")
	}
	if err == nil {
		t.Fatal("read a byte from a closed transport's connection")
	}
}
