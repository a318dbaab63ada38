package client_test

import (
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy forwards TCP connections to a server byte for byte, so that it
// carries HTTP/2 (the session's stream) as well as HTTP/1.1. A test can cut
// every connection (cut), stop forwarding while keeping the connections
// open (pause: a network that went silent), or throw away what the server
// sends (dropReplies: requests arrive and are applied, replies are lost).
type tcpProxy struct {
	target string
	ln     net.Listener

	mu          sync.Mutex
	conns       []net.Conn
	paused      bool
	dropReplies bool
	accepted    int
}

// newTCPProxy starts a proxy to the server at url ("http://host:port") and
// returns it and its URL.
func newTCPProxy(t *testing.T, url string) (*tcpProxy, string) {
	t.Helper()
	p := &tcpProxy{target: url[len("http://"):]}
	ln := listenLoopback(t)
	p.ln = ln
	t.Cleanup(func() { ln.Close(); p.setPaused(false); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.accepted++
			p.mu.Unlock()
			go p.pump(s, c, false)
			go p.pump(c, s, true)
		}
	}()
	return p, "http://" + ln.Addr().String()
}

// pump copies from src to dst; reply: src is the server.
func (p *tcpProxy) pump(dst, src net.Conn, reply bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for p.isPaused() {
				time.Sleep(5 * time.Millisecond)
			}
			p.mu.Lock()
			drop := reply && p.dropReplies
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *tcpProxy) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

func (p *tcpProxy) setPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.mu.Unlock()
}

func (p *tcpProxy) setDropReplies(v bool) {
	p.mu.Lock()
	p.dropReplies = v
	p.mu.Unlock()
}

// connections is how many client connections the proxy has accepted.
func (p *tcpProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// cut closes every connection open through the proxy.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// stop takes the proxy down for good: it accepts no more connections (its
// port refuses them) and cuts every open one — a server that died.
func (p *tcpProxy) stop() {
	p.ln.Close()
	p.setPaused(false)
	p.cut()
}
