package chaos

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is the way data flows through a Proxy.
type Direction int

const (
	Both       Direction = iota // both ways
	Upstream                    // client → server (requests)
	Downstream                  // server → client (replies)
)

func (d Direction) String() string {
	switch d {
	case Both:
		return "both"
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Proxy is the harness's fault-injecting TCP proxy, listening on a
// loopback port in front of one upstream address. Every client connection
// gets its own upstream connection and two pumps, one per direction; a
// fault changes what the pumps do with the next chunk they read:
//
//   - Blackhole(dir): chunks in that direction are dropped (not buffered);
//     the connection stays open and the other direction flows. New
//     connections are accepted and get the same treatment. Heal closes
//     every connection that dropped bytes (its stream is unusable), so a
//     client sees its blackholed request fail, not resume.
//   - Delay(d): each chunk is delivered d after it was read, in order, in
//     each direction (a round trip takes 2d longer). Heal: new chunks go at
//     once; the ones in flight keep their time (at most d).
//   - Reset: every open connection is closed on both sides (with SO_LINGER
//     0: an RST); the listener goes on accepting on the same address.
//
// No fault and no heal ever waits on a connection: a pump blocked writing to
// a peer that does not read (a SIGSTOPped worker) holds no lock. The first
// version used Shopify's toxiproxy v2.5.0 as a library; its toxic add and
// remove flush every link synchronously (a 5 s write bound per buffered
// chunk) under the toxic collection's lock, and with paused workers a
// 10-minute run wedged it after 47 s (Shopify/toxiproxy#412): every later
// connection fault was skipped.
type Proxy struct {
	addr     string
	upstream string
	name     string
	ln       net.Listener
	op       chan struct{} // one control call at a time
	wedged   atomic.Bool   // a control call did not return within proxyOpTimeout
	done     chan struct{} // closed by Close
	pumps    sync.WaitGroup

	mu     sync.Mutex
	closed bool
	drop   [2]bool       // per direction (dirUp, dirDown): drop chunks
	delay  time.Duration // added to each chunk, each direction
	links  map[*link]struct{}
}

const (
	dirUp   = 0 // client → server
	dirDown = 1 // server → client
)

// link is one client connection and its upstream connection.
type link struct {
	client, server net.Conn
	dirty          atomic.Bool // bytes were dropped: closed by Heal
	once           sync.Once
}

func (l *link) close() {
	l.once.Do(func() {
		for _, c := range []net.Conn{l.client, l.server} {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			c.Close()
		}
	})
}

// proxyOpTimeout bounds every control call of a Proxy (none blocks on a
// connection today; the bound stays so that a future one cannot hang the
// nemesis). A Proxy whose call did not return is wedged: every later call
// fails at once with ErrProxyWedged.
var proxyOpTimeout = 30 * time.Second

// ErrProxyWedged: a control call did not return in time (see Proxy).
var ErrProxyWedged = errors.New("chaos: proxy control call did not return (proxy wedged)")

var errProxyClosed = errors.New("chaos: proxy closed")

// NewProxy starts a proxy named name on 127.0.0.1:0 forwarding to upstream
// (host:port).
func NewProxy(name, upstream string) (*Proxy, error) {
	return NewProxyOn(name, "127.0.0.1:0", upstream)
}

// NewProxyOn is NewProxy listening on listen (host:port; port 0 picks one).
func NewProxyOn(name, listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("chaos: proxy %s on %s: %w", name, listen, err)
	}
	p := &Proxy{addr: ln.Addr().String(), upstream: upstream, name: name, ln: ln,
		op: make(chan struct{}, 1), done: make(chan struct{}), links: map[*link]struct{}{}}
	p.pumps.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.pumps.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(5 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		p.pumps.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.pumps.Done()
	s, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	l := &link{client: c, server: s}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(l, dirUp, c, s) }()
	go func() { defer wg.Done(); p.pump(l, dirDown, s, c) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// chunk is bytes read from one side, to be written to the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst through the current faults of dir: a reader that
// drops or stamps each chunk, and a writer that delivers stamped chunks at
// their time. A full queue (the writer blocked on a peer that does not
// read) blocks the reader: TCP backpressure, no lock held. Either side
// ending closes the link.
func (p *Proxy) pump(l *link, dir int, src, dst net.Conn) {
	defer l.close()
	q := make(chan chunk, 64)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer l.close()
		for ch := range q {
			if d := time.Until(ch.due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-p.done:
					t.Stop()
					return
				}
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	defer func() { close(q); <-writerDone }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop, delay := p.drop[dir], p.delay
			if drop {
				// Marked under the lock Heal takes to clear drop: a Heal
				// then either sees the link dirty and closes it, or ran
				// before and this chunk was not dropped.
				l.dirty.Store(true)
			}
			p.mu.Unlock()
			if !drop {
				b := make([]byte, n)
				copy(b, buf[:n])
				select {
				case q <- chunk{b: b, due: time.Now().Add(delay)}:
				case <-writerDone:
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Addr is the proxy's listening address (host:port); clients dial it.
func (p *Proxy) Addr() string { return p.addr }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Name is the proxy's name.
func (p *Proxy) Name() string { return p.name }

// Wedged reports whether a control call of this proxy did not return.
func (p *Proxy) Wedged() bool { return p.wedged.Load() }

// do runs f, one call at a time, within proxyOpTimeout.
func (p *Proxy) do(what string, f func() error) error {
	if p.wedged.Load() {
		return fmt.Errorf("chaos: proxy %s: %s: %w", p.name, what, ErrProxyWedged)
	}
	t := time.NewTimer(proxyOpTimeout)
	defer t.Stop()
	select {
	case p.op <- struct{}{}:
	case <-t.C:
		return fmt.Errorf("chaos: proxy %s: %s: %w", p.name, what, ErrProxyWedged)
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-p.op }()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-t.C:
		p.wedged.Store(true)
		return fmt.Errorf("chaos: proxy %s: %s after %v: %w", p.name, what, proxyOpTimeout, ErrProxyWedged)
	}
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// cut closes the links for which keep returns false.
func (p *Proxy) cut(keep func(*link) bool) int {
	p.mu.Lock()
	var victims []*link
	for l := range p.links {
		if !keep(l) {
			victims = append(victims, l)
		}
	}
	p.mu.Unlock()
	for _, l := range victims {
		l.close()
	}
	return len(victims)
}

// Reset cuts every open connection (both sides closed, with an RST) and
// goes on accepting new ones on the same address. Faults in place stay.
func (p *Proxy) Reset() error {
	return p.do("reset", func() error {
		if p.isClosed() {
			return errProxyClosed
		}
		p.cut(func(*link) bool { return false })
		return nil
	})
}

// Blackhole drops the bytes flowing in dir (Both, Upstream: client→server,
// Downstream: server→client) on every connection, open or new, until Heal.
// Connections stay open. Blackholing a direction twice is a no-op.
func (p *Proxy) Blackhole(dir Direction) error {
	return p.do("blackhole "+dir.String(), func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return errProxyClosed
		}
		if dir == Both || dir == Upstream {
			p.drop[dirUp] = true
		}
		if dir == Both || dir == Downstream {
			p.drop[dirDown] = true
		}
		return nil
	})
}

// Delay adds latency d to each direction of every connection, open or new,
// until Heal. A second Delay replaces the first.
func (p *Proxy) Delay(d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("chaos: delay %v: at least 1ms", d)
	}
	return p.do("delay", func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			return errProxyClosed
		}
		p.delay = d
		return nil
	})
}

// Toxics names the faults in place, sorted (empty after Heal).
func (p *Proxy) Toxics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	if p.drop[dirUp] {
		out = append(out, "blackhole_upstream")
	}
	if p.drop[dirDown] {
		out = append(out, "blackhole_downstream")
	}
	if p.delay > 0 {
		out = append(out, "delay_downstream", "delay_upstream")
	}
	sort.Strings(out)
	return out
}

// Heal removes every fault: data flows again. Connections that dropped
// bytes in a black hole are closed (their streams are unusable); the others
// stay open.
func (p *Proxy) Heal() error {
	return p.do("heal", func() error {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errProxyClosed
		}
		p.drop = [2]bool{}
		p.delay = 0
		p.mu.Unlock()
		p.cut(func(l *link) bool { return !l.dirty.Load() })
		return nil
	})
}

// Close stops the proxy and closes every connection through it. It is
// idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	err := p.ln.Close()
	p.cut(func(*link) bool { return false })
	p.pumps.Wait()
	return err
}
