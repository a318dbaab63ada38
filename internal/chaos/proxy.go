package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
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

// streams are toxiproxy's stream names of d.
func (d Direction) streams() []string {
	switch d {
	case Upstream:
		return []string{"upstream"}
	case Downstream:
		return []string{"downstream"}
	}
	return []string{"upstream", "downstream"}
}

// toxiServer is the toxiproxy "API server" every Proxy hangs off: it only
// carries the logger (silenced) and the metrics container (none enabled);
// its HTTP API is never started.
var (
	toxiOnce   sync.Once
	toxiServer *toxiproxy.ApiServer
	toxiCtx    context.Context // carries the silent logger for RemoveToxic's zerolog.Ctx
)

func toxi() *toxiproxy.ApiServer {
	toxiOnce.Do(func() {
		nop := zerolog.Nop()
		toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), nop)
		toxiCtx = nop.WithContext(context.Background())
	})
	return toxiServer
}

// Proxy is a fault-injecting TCP proxy (Shopify's toxiproxy v2.5.0, used as a
// library) listening on a loopback port in front of one upstream address.
//
// What each fault does to the bytes, as toxiproxy implements it:
//
//   - Blackhole(dir): a "timeout" toxic with timeout 0 on dir: bytes in that
//     direction are dropped (not buffered), the connection stays open and
//     the other direction flows. New connections are accepted and get the
//     same treatment. Heal removes the toxic, and toxiproxy then closes
//     every connection that had it (the dropped bytes left its stream
//     unusable), so a client sees its blackholed request fail, not resume.
//   - Delay(d): a "latency" toxic of d on each direction (a round trip takes
//     2d longer); Heal delivers what is in flight and removes it.
//   - Reset: stops the proxy, which closes both sides of every open
//     connection, and starts it again on the same address. A reset_peer
//     toxic does not do this: toxiproxy sets SO_LINGER 0 only on links
//     started while such a toxic is present, and the toxic acts only when
//     the next bytes arrive, so idle (keep-alive) connections would live on.
//     The close is a FIN rather than an RST; either way a request in flight
//     fails with no reply (the outcome is unknown to the client) and an idle
//     pooled connection is dropped.
type Proxy struct {
	addr     string
	upstream string
	name     string
	p        *toxiproxy.Proxy
	op       chan struct{} // one toxiproxy call at a time
	wedged   atomic.Bool   // a call did not return within proxyOpTimeout

	mu     sync.Mutex
	closed bool
	toxics map[string]bool // names of the toxics added since the last Heal
}

// proxyOpTimeout bounds every toxiproxy call a Proxy makes. Removing a
// toxic can hang in toxiproxy (Shopify/toxiproxy#412, #558: a link stuck
// writing to a peer that does not read holds the toxic collection's lock):
// the harness must not hang with it. A Proxy whose call did not return is
// wedged: every later call fails at once with ErrProxyWedged.
var proxyOpTimeout = 30 * time.Second

// ErrProxyWedged: a toxiproxy call did not return in time (see Proxy).
var ErrProxyWedged = errors.New("chaos: toxiproxy call did not return (proxy wedged)")

var errProxyClosed = errors.New("chaos: proxy closed")

// NewProxy starts a proxy named name on 127.0.0.1:0 forwarding to upstream
// (host:port).
func NewProxy(name, upstream string) (*Proxy, error) {
	return NewProxyOn(name, "127.0.0.1:0", upstream)
}

// NewProxyOn is NewProxy listening on listen (host:port; port 0 picks one).
func NewProxyOn(name, listen, upstream string) (*Proxy, error) {
	p := toxiproxy.NewProxy(toxi(), name, listen, upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("chaos: proxy %s on %s: %w", name, listen, err)
	}
	// Start has returned after the proxy's goroutine set Listen to the
	// bound address (it sends on a channel after the write).
	return &Proxy{p: p, addr: p.Listen, upstream: upstream, name: name,
		op: make(chan struct{}, 1), toxics: map[string]bool{}}, nil
}

// Addr is the proxy's listening address (host:port); clients dial it.
func (p *Proxy) Addr() string { return p.addr }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Name is the proxy's name.
func (p *Proxy) Name() string { return p.name }

// Wedged reports whether a toxiproxy call of this proxy did not return.
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

// Reset cuts every open connection (both sides closed) and goes on
// accepting new ones on the same address. Toxics in place stay in place.
// While it restarts (a few milliseconds) a new connection may be refused.
func (p *Proxy) Reset() error {
	return p.do("reset", func() error {
		if p.isClosed() {
			return errProxyClosed
		}
		p.p.Stop()
		// The listener is closed; binding the same loopback port again can
		// only fail if another process grabbed it in between: retry a while.
		var err error
		for i := 0; i < 50; i++ {
			if err = p.p.Start(); err == nil {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("chaos: proxy %s: restart on %s after reset: %w", p.name, p.addr, err)
	})
}

// Blackhole drops the bytes flowing in dir (Both, Upstream: client→server,
// Downstream: server→client) on every connection, open or new, until Heal.
// Connections stay open. Blackholing a direction twice is a no-op.
func (p *Proxy) Blackhole(dir Direction) error {
	for _, s := range dir.streams() {
		if err := p.add("blackhole_"+s, "timeout", s, `{"timeout":0}`); err != nil {
			return err
		}
	}
	return nil
}

// Delay adds latency d to each direction of every connection, open or new,
// until Heal. A second Delay replaces the first.
func (p *Proxy) Delay(d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("chaos: delay %v: at least 1ms", d)
	}
	for _, s := range []string{"upstream", "downstream"} {
		name := "delay_" + s
		if err := p.remove(name); err != nil {
			return err
		}
		if err := p.add(name, "latency", s, fmt.Sprintf(`{"latency":%d}`, d.Milliseconds())); err != nil {
			return err
		}
	}
	return nil
}

func (p *Proxy) add(name, typ, stream, attrs string) error {
	return p.do("add "+name, func() error {
		p.mu.Lock()
		closed, had := p.closed, p.toxics[name]
		p.mu.Unlock()
		if closed {
			return errProxyClosed
		}
		if had {
			return nil
		}
		js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			return fmt.Errorf("chaos: proxy %s: add %s: %w", p.name, name, err)
		}
		p.mu.Lock()
		p.toxics[name] = true
		p.mu.Unlock()
		return nil
	})
}

// remove removes toxic name if it is in place.
func (p *Proxy) remove(name string) error {
	return p.do("remove "+name, func() error {
		p.mu.Lock()
		closed, had := p.closed, p.toxics[name]
		delete(p.toxics, name)
		p.mu.Unlock()
		if closed {
			return errProxyClosed
		}
		if !had {
			return nil
		}
		if err := p.p.Toxics.RemoveToxic(toxiCtx, name); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
			return fmt.Errorf("chaos: proxy %s: remove %s: %w", p.name, name, err)
		}
		return nil
	})
}

// Toxics lists the toxics in place, sorted ("blackhole_upstream",
// "delay_downstream", ...).
func (p *Proxy) Toxics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.toxics))
	for n := range p.toxics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Heal removes every toxic: data flows again. When toxics were in place it
// also cuts every connection that had them (stop, remove, start on the same
// address): toxiproxy's RemoveToxic flushes each link's buffered chunks with
// a 5 s write bound per chunk, so removing a latency toxic from the link of
// a paused (SIGSTOPped) client took 26 s in a run and held up the rest of
// the schedule; with the links closed first there is nothing to flush.
func (p *Proxy) Heal() error {
	return p.do("heal", func() error {
		if p.isClosed() {
			return errProxyClosed
		}
		p.mu.Lock()
		had := len(p.toxics) > 0
		p.mu.Unlock()
		if had {
			p.p.Stop()
		}
		p.p.Toxics.ResetToxics(toxiCtx)
		p.mu.Lock()
		clear(p.toxics)
		p.mu.Unlock()
		if !had {
			return nil
		}
		var err error
		for i := 0; i < 50; i++ {
			if err = p.p.Start(); err == nil {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		return fmt.Errorf("chaos: proxy %s: restart on %s after heal: %w", p.name, p.addr, err)
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
	p.mu.Unlock()
	return p.do("close", func() error {
		p.p.Stop()
		return nil
	})
}
