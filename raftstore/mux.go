package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The first byte of every connection to a node's raft port says what the
// rest of it carries: one port serves both, so a node reaches a peer's API
// knowing only the peer's raft address (what raft.LeaderWithID gives), and
// no address other than the raft one has to be recorded anywhere.
const (
	// HeaderRaft starts a connection carrying hashicorp/raft's
	// NetworkTransport protocol.
	HeaderRaft byte = 'R'
	// HeaderAPI starts a connection carrying the Fence API (HTTP/2
	// cleartext), served like the client port.
	HeaderAPI byte = 'A'
	// HeaderRaftCluster starts a raft connection whose dialer names its
	// cluster id: one length byte (1..255), the id, then raft's protocol.
	// A node whose cluster id is known (Mux.SetClusterID) dials with it;
	// the acceptor closes it when its own id is known and differs (a node
	// of the cluster a backup was taken of, started against the cluster
	// restored from it). A node without an id (new, waiting to join)
	// dials with HeaderRaft, which is accepted as before.
	HeaderRaftCluster byte = 'C'
)

// headerTimeout bounds the wait for a new connection's header byte: a
// connection that says nothing is closed instead of holding a goroutine.
const headerTimeout = 10 * time.Second

// ErrMuxClosed is returned by the mux's listeners and dials once it (or the
// listener) is closed. It wraps net.ErrClosed, which is what servers
// (net/http, raft's transport) check for to stop accepting quietly.
var ErrMuxClosed = fmt.Errorf("raftstore: mux closed: %w", net.ErrClosed)

// Mux is a node's raft port: one TCP listener whose connections are handed
// to raft (header 'R') or to the API server (header 'A'), and the dialer for
// both kinds of outgoing connection. Its methods are safe for concurrent use.
//
// Whoever calls Listen closes the Mux, after the node that uses it is
// closed: a node's raft.Shutdown closes only the raft side (the stream layer
// its transport was given), the API server closes only APIListener.
type Mux struct {
	ln        net.Listener
	advertise string
	dialer    Dialer // outgoing dials (net.Dialer outside tests)
	log       *slog.Logger
	peers     *peerLog // raft peers logged unreachable (peerlog.go)

	// Connection limits (WithConnLimits): connections still waiting for
	// their header byte, and raft and API connections handed out and not
	// yet closed. Past a limit a new connection is closed at once: a peer
	// (or anyone) opening connections without end must not take the
	// process's file descriptors.
	maxPending, maxRaft, maxAPI int

	mu      sync.Mutex
	pending map[net.Conn]struct{} // accepted, header byte not read yet
	nRaft   int                   // raft connections handed out, open
	nAPI    int                   // API connections handed out, open
	refused int                   // connections closed at a limit since the last log line
	lastLog time.Time
	raft    *connQueue   // the raft stream layer's queue (nil: none, conns refused)
	layer   *streamLayer // the latest raft stream layer (tests look at its connections)
	api     *connQueue   // APIListener's queue, made on first use
	closed  chan struct{}
	once    sync.Once
	wg      sync.WaitGroup

	clusterID   atomic.Pointer[func() string] // SetClusterID
	lastRefusal time.Time                     // last "another cluster" log line (m.mu)

	peerTLSState // WithPeerTLS (peertls.go)
}

// SetClusterID gives the mux its node's cluster id, read at every raft
// dial and accept ("" while unknown): raft connections between nodes
// whose ids are both known and differ are refused (HeaderRaftCluster).
// nil removes it.
func (m *Mux) SetClusterID(fn func() string) {
	if fn == nil {
		m.clusterID.Store(nil)
		return
	}
	m.clusterID.Store(&fn)
}

func (m *Mux) ownClusterID() string {
	if p := m.clusterID.Load(); p != nil {
		return (*p)()
	}
	return ""
}

// Default connection limits of the raft port (WithConnLimits).
const (
	DefaultMaxPendingConns = 256
	DefaultMaxRaftConns    = 1024
	DefaultMaxAPIConns     = 1024
)

// WithConnLimits bounds the connections waiting for their header byte, and
// the raft and the API connections open at once (0: the default). A
// connection past a limit is closed at once, and counted in a WARN line.
func WithConnLimits(pending, raft, api int) MuxOption {
	return func(x *Mux) {
		if pending > 0 {
			x.maxPending = pending
		}
		if raft > 0 {
			x.maxRaft = raft
		}
		if api > 0 {
			x.maxAPI = api
		}
	}
}

// MuxOption configures Listen.
type MuxOption func(*Mux)

// Dialer makes the mux's outgoing connections (raft and API); a
// *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// WithDialer makes every outgoing dial (raft and API) through d (nil: a
// net.Dialer). Only a test harness sets one: the chaos harness puts a
// fault proxy on every directed peer link with a MapDialer. The advertised
// address, and so the address recorded in the raft configuration, is
// unchanged.
func WithDialer(d Dialer) MuxOption {
	return func(x *Mux) {
		if d != nil {
			x.dialer = d
		}
	}
}

// MapDialer dials the address an address maps to instead of it (a fault
// proxy), and any other address as it is. TEST ONLY: cmd/fence makes one
// from FENCE_TEST_DIAL_MAP (ParseDialMap).
type MapDialer map[string]string

// DialContext dials m[address] if address is a key of m, else address.
func (m MapDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if to, ok := m[address]; ok {
		address = to
	}
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}

// WithMuxLogger sets the logger (default slog.Default()).
func WithMuxLogger(l *slog.Logger) MuxOption {
	return func(x *Mux) {
		if l != nil {
			x.log = l
		}
	}
}

// ParseDialMap parses FENCE_TEST_DIAL_MAP's format,
// "raftaddr1=proxyaddr1,raftaddr2=proxyaddr2" (spaces around items are
// ignored; "" is no map). TEST ONLY, see MapDialer.
func ParseDialMap(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	m := make(map[string]string)
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		from, to, ok := strings.Cut(item, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("raftstore: dial map item %q: want raftaddr=dialaddr", item)
		}
		if _, dup := m[from]; dup {
			return nil, fmt.Errorf("raftstore: dial map: %q mapped twice", from)
		}
		m[from] = to
	}
	return m, nil
}

// Listen binds the raft port on bind ("host:port"; port 0 picks one) and
// starts handing out its connections. advertise is the address peers dial
// and the raft configuration records; "" means the bound address, which
// must then not be unspecified (0.0.0.0, [::]): peers could not dial it.
func Listen(bind, advertise string, opts ...MuxOption) (*Mux, error) {
	m := &Mux{log: slog.Default(), dialer: &net.Dialer{}, peers: newPeerLog(), closed: make(chan struct{}), pending: map[net.Conn]struct{}{},
		maxPending: DefaultMaxPendingConns, maxRaft: DefaultMaxRaftConns, maxAPI: DefaultMaxAPIConns}
	for _, o := range opts {
		o(m)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raftstore: listen on raft address: %w", err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if err := checkAdvertise(advertise); err != nil {
		ln.Close()
		return nil, err
	}
	m.ln, m.advertise = ln, advertise
	m.wg.Add(1)
	go m.acceptLoop()
	if m.peerCerts != nil {
		m.wg.Add(1)
		go m.sweepLoop()
	}
	return m, nil
}

// checkAdvertise refuses an address peers cannot dial.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("raftstore: raft advertise address %q: %w", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("raftstore: raft advertise address %q: port must be 1-65535", addr)
	}
	if host == "" {
		return fmt.Errorf("raftstore: raft advertise address %q has no host: give --raft-advertise", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("raftstore: raft advertise address %q is unspecified: peers cannot dial it (give --raft-advertise)", addr)
	}
	return nil
}

// Addr is the advertised raft address: what peers dial, what the raft
// configuration records, and what Node.Leader reports.
func (m *Mux) Addr() string { return m.advertise }

// BindAddr is the address the port listens on (the bound port when Listen
// was given port 0).
func (m *Mux) BindAddr() net.Addr { return m.ln.Addr() }

// Close closes the port and every connection accepted but not yet handed
// out; connections already handed out belong to their takers. Safe to call
// more than once.
func (m *Mux) Close() error {
	var err error
	m.once.Do(func() {
		close(m.closed)
		err = m.ln.Close()
		// A connection still waiting for its header byte would hold route
		// (and so this wait) for up to headerTimeout.
		m.mu.Lock()
		for c := range m.pending {
			c.Close()
		}
		m.mu.Unlock()
		m.wg.Wait()
	})
	return err
}

// acceptLoop accepts connections and sorts each by its header byte, in a
// goroutine of its own so a silent connection holds up no other.
func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	var backoff time.Duration
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A temporary failure (out of file descriptors): wait a
			// little, as net/http does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			m.log.Warn("raft port: accept failed; retrying", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-m.closed:
				return
			}
			continue
		}
		backoff = 0
		m.mu.Lock()
		select {
		case <-m.closed: // Close has closed the pending ones already
			m.mu.Unlock()
			c.Close()
			return
		default:
		}
		if len(m.pending) >= m.maxPending {
			m.refuseLocked(c, "connections waiting for their header byte", m.maxPending)
			m.mu.Unlock()
			continue
		}
		m.pending[c] = struct{}{}
		m.mu.Unlock()
		m.wg.Add(1)
		go m.route(c)
	}
}

// route reads c's header byte and hands c to the raft or the API side.
func (m *Mux) route(c net.Conn) {
	defer m.wg.Done()
	raw := c
	var err error
	if m.peerCerts != nil {
		// Mutual TLS first: the header byte and all after it are inside.
		if c, err = m.acceptTLS(raw); err != nil {
			m.mu.Lock()
			delete(m.pending, raw)
			m.mu.Unlock()
			return
		}
	}
	var hdr [1]byte
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	_, err = io.ReadFull(c, hdr[:])
	m.mu.Lock()
	delete(m.pending, raw)
	m.mu.Unlock()
	if err != nil {
		c.Close()
		return
	}
	if hdr[0] == HeaderRaftCluster {
		var n [1]byte
		var id []byte
		if _, err = io.ReadFull(c, n[:]); err == nil && n[0] > 0 {
			id = make([]byte, n[0])
			_, err = io.ReadFull(c, id)
		}
		if err != nil || n[0] == 0 {
			c.Close()
			return
		}
		if own := m.ownClusterID(); own != "" && own != string(id) {
			m.mu.Lock()
			if now := time.Now(); now.Sub(m.lastRefusal) >= time.Second {
				m.lastRefusal = now
				m.log.Warn("raft port: a node of another cluster was refused (a node of the cluster a backup was restored from? wipe its data dir)",
					"remote", c.RemoteAddr().String(), "its_cluster_id", string(id), "cluster_id", own)
			}
			m.mu.Unlock()
			c.Close()
			return
		}
		hdr[0] = HeaderRaft
	}
	c.SetReadDeadline(time.Time{})
	var q *connQueue
	m.mu.Lock()
	switch hdr[0] {
	case HeaderRaft:
		q = m.raft
		if q != nil {
			if m.nRaft >= m.maxRaft {
				m.refuseLocked(c, "raft connections", m.maxRaft)
				m.mu.Unlock()
				return
			}
			m.nRaft++
			c = &countedConn{Conn: c, n: &m.nRaft, mu: &m.mu}
		}
	case HeaderAPI:
		q = m.apiQueueLocked()
		if m.nAPI >= m.maxAPI {
			m.refuseLocked(c, "API connections", m.maxAPI)
			m.mu.Unlock()
			return
		}
		m.nAPI++
		c = &countedConn{Conn: c, n: &m.nAPI, mu: &m.mu}
	default:
		m.mu.Unlock()
		m.log.Warn("raft port: connection with an unknown header byte closed", "remote", c.RemoteAddr().String(), "byte", hdr[0])
		c.Close()
		return
	}
	m.mu.Unlock()
	if q == nil || !q.put(c, m.closed) {
		c.Close()
	}
}

// refuseLocked closes c, which is past the limit of what (m.mu held), and
// logs the refusals at most once a second.
func (m *Mux) refuseLocked(c net.Conn, what string, limit int) {
	c.Close()
	m.refused++
	if now := time.Now(); now.Sub(m.lastLog) >= time.Second {
		m.log.Warn("raft port: connections closed at a limit", "limit", what, "max", limit, "closed", m.refused)
		m.refused, m.lastLog = 0, now
	}
}

// countedConn is a connection handed out under a limit: closing it (once)
// gives its place back.
type countedConn struct {
	net.Conn
	n    *int
	mu   *sync.Mutex
	once sync.Once
}

// NetConn is the connection under c (PeerNodeID looks through it).
func (c *countedConn) NetConn() net.Conn { return c.Conn }

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.mu.Lock()
		*c.n--
		c.mu.Unlock()
	})
	return err
}

// apiQueueLocked returns the API queue, made on first use (m.mu held).
func (m *Mux) apiQueueLocked() *connQueue {
	if m.api == nil {
		m.api = newConnQueue()
	}
	return m.api
}

// APIListener is the listener of the API connections (their header byte
// already read): serve the Fence API on it. API connections that arrive
// before it is asked for wait for it. Closing it closes only the API side
// (API connections are refused until APIListener is called again), not
// the port.
func (m *Mux) APIListener() net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.api != nil && m.api.isClosed() {
		m.api = nil
	}
	return &muxListener{q: m.apiQueueLocked(), mux: m}
}

// DialAPI connects to the Fence API of the node whose raft address is
// raftAddr (through the test dial map, if any). ctx bounds the dial.
func (m *Mux) DialAPI(ctx context.Context, raftAddr string) (net.Conn, error) {
	return m.dial(ctx, raftAddr, []byte{HeaderAPI})
}

// dialRaft connects to a peer's raft side, naming this node's cluster id
// when it is known.
func (m *Mux) dialRaft(ctx context.Context, addr string) (net.Conn, error) {
	hdr := []byte{HeaderRaft}
	if id := m.ownClusterID(); id != "" && len(id) < 256 {
		hdr = append([]byte{HeaderRaftCluster, byte(len(id))}, id...)
	}
	return m.dial(ctx, addr, hdr)
}

// dial connects to addr (through the dialer) and sends header.
func (m *Mux) dial(ctx context.Context, addr string, header []byte) (net.Conn, error) {
	select {
	case <-m.closed:
		return nil, ErrMuxClosed
	default:
	}
	c, err := m.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if m.peerCerts != nil {
		if c, err = m.dialTLS(ctx, c, addr); err != nil {
			return nil, err
		}
	}
	// The header goes out with a deadline: a peer that accepts but never
	// reads must not hold the caller past its context (or forever).
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	} else {
		c.SetWriteDeadline(time.Now().Add(headerTimeout))
	}
	if _, err := c.Write(header); err != nil {
		c.Close()
		return nil, fmt.Errorf("raftstore: send connection header to %s: %w", addr, err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// connQueue hands accepted connections of one kind to their listener.
type connQueue struct {
	conns chan net.Conn
	done  chan struct{} // closed when the listener closes
	once  sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{conns: make(chan net.Conn), done: make(chan struct{})}
}

// put hands c to the listener's Accept; false if the listener or the mux
// closed first (the caller closes c).
func (q *connQueue) put(c net.Conn, closed <-chan struct{}) bool {
	select {
	case q.conns <- c:
		return true
	case <-q.done:
		return false
	case <-closed:
		return false
	}
}

func (q *connQueue) close() { q.once.Do(func() { close(q.done) }) }

func (q *connQueue) isClosed() bool {
	select {
	case <-q.done:
		return true
	default:
		return false
	}
}

// muxListener is a net.Listener over a connQueue.
type muxListener struct {
	q   *connQueue
	mux *Mux
}

func (l *muxListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.q.conns:
		return c, nil
	case <-l.q.done:
		return nil, ErrMuxClosed
	case <-l.mux.closed:
		return nil, ErrMuxClosed
	}
}

func (l *muxListener) Close() error {
	l.q.close()
	return nil
}

// Addr is the advertised raft address (the API side shares the port).
func (l *muxListener) Addr() net.Addr { return advertisedAddr(l.mux.advertise) }

// advertisedAddr is a net.Addr for an advertised "host:port" (the host may
// be a name, which a *net.TCPAddr could not carry).
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// DialAPI connects directly (no dial map) to the Fence API side of the
// raft port at raftAddr, as Mux.DialAPI does for a node: for a caller
// without a mux (tests reaching a node as its peers do).
func DialAPI(ctx context.Context, raftAddr string) (net.Conn, error) {
	c, err := new(net.Dialer).DialContext(ctx, "tcp", raftAddr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{HeaderAPI}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
