package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Client talks to a Fence server, or to the nodes of a Fence cluster. It is
// safe for concurrent use. Close it when done: Close ends every lease it
// handed out and its session.
type Client struct {
	cfg       config
	endpoints []*endpoint
	// cur is the index of the endpoint in use: sticky, it moves to the next
	// endpoint only when the current one fails (failover).
	cur atomic.Int32
	// sought: the Client has looked for the leader (seekLeader) before
	// its first call.
	sought atomic.Bool
	// noStatus: an endpoint refused NodeStatus (authentication on, no
	// admin token); the Client no longer looks for the leader.
	noStatus atomic.Bool
	sess     *session // nil with WithoutSession

	mu sync.Mutex
	// leases are the standalone leases it handed out (a session's are its
	// session's: one map a lease).
	leases map[*Lease]struct{}
	closed bool

	// The last proof key and owner of a lease it handed out: a lease of
	// the same shares them rather than keeping its own copy of what every
	// reply decodes afresh (a million leases, one owner).
	lastKey   atomic.Pointer[proofKey]
	lastOwner atomic.Pointer[string]
}

// proofKey returns the proofKey of cluster and key, shared with the
// last lease's when they are the same.
func (c *Client) proofKey(cluster, key string) *proofKey {
	if k := c.lastKey.Load(); k != nil && k.clusterID == cluster && k.keyID == key {
		return k
	}
	k := &proofKey{clusterID: cluster, keyID: key}
	c.lastKey.Store(k)
	return k
}

// shareOwner returns owner, sharing the bytes of the last lease's owner
// when equal.
func (c *Client) shareOwner(owner string) string {
	if o := c.lastOwner.Load(); o != nil && *o == owner {
		return *o
	}
	c.lastOwner.Store(&owner)
	return owner
}

// endpoint is one server address and its API stubs.
type endpoint struct {
	idx       int32
	url       string
	locks     fencev1connect.LockServiceClient
	resources fencev1connect.ResourceServiceClient
	cluster   fencev1connect.ClusterServiceClient // NodeStatus: is it the leader (seekLeader)
	sessions  fencev1connect.SessionServiceClient // over the session's HTTP/2 client; nil without a session
	lean      string                              // its lean session port (WithLeanSessions), or ""
}

// ErrClientClosed is the reason a lease is lost when its Client was closed,
// and the error of calls made after Close.
var ErrClientClosed = errors.New("fence: client closed")

// New returns a Client for the server at url, a URL such as
// "http://127.0.0.1:7420", or for several servers (the nodes of a cluster):
// url may be a comma-separated list, and WithEndpoints adds more. It does
// not connect until the first call.
//
// With several endpoints the Client uses one at a time and keeps using it
// while it works (sticky). It goes to the leader: before its first call,
// and when its session's stream opens again after a break, it asks every
// endpoint which one leads (NodeStatus) and uses that one, for sessions on
// a follower cost the cluster more (docs/clients.md). When no endpoint
// says it leads (or NodeStatus is refused), Clients stay spread over the
// endpoints: the Clients of one process start at successive endpoints
// from a random first one. WithEndpointsInOrder turns both off: the
// Client starts at the first endpoint. When the endpoint in use cannot be
// reached, answers Unavailable
// or gives no answer within the attempt timeout, the Client moves to the
// next one, and retries there only what the usual retry rules make safe
// (request_id, op_id, session seq: see Retries in the package doc). The
// session's stream reconnects to the next endpoint and resends every
// unanswered request with its seq.
func New(url string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	urls, err := parseEndpoints(url, cfg.endpoints)
	if err != nil {
		return nil, err
	}
	if !cfg.noSession {
		if err := fence.ValidateTTL(cfg.sessionTTL, maxDuration); err != nil {
			return nil, err
		}
	}
	if err := cfg.checkTLS(urls); err != nil {
		return nil, err
	}
	if n := len(cfg.leanAddrs); n > 0 && n != len(urls) {
		return nil, fmt.Errorf("fence: WithLeanSessions: %d lean session addresses for %d endpoints (one per endpoint, in their order)", n, len(urls))
	}
	if cfg.httpClient == nil {
		cfg.httpClient = defaultHTTPClient(cfg.protocol, cfg.dialer, cfg.tls)
	}
	copts := cfg.connectOptions()
	c := &Client{cfg: cfg, leases: map[*Lease]struct{}{}}
	for i, base := range urls {
		c.endpoints = append(c.endpoints, &endpoint{
			idx:       int32(i),
			url:       base,
			locks:     fencev1connect.NewLockServiceClient(cfg.httpClient, base, copts...),
			resources: fencev1connect.NewResourceServiceClient(cfg.httpClient, base, copts...),
			cluster:   fencev1connect.NewClusterServiceClient(cfg.httpClient, base, copts...),
		})
		if len(cfg.leanAddrs) > 0 {
			c.endpoints[i].lean = cfg.leanAddrs[i]
		}
	}
	if !cfg.inOrder {
		c.cur.Store(spreadStart(len(c.endpoints)))
	}
	if !cfg.noSession {
		c.sess = newSession(c, copts)
	}
	return c, nil
}

// parseEndpoints splits list (comma-separated URLs) and appends more; it
// returns the base URLs, without duplicates, in the order given.
func parseEndpoints(list string, more []string) ([]string, error) {
	var out []string
	for _, raw := range append(strings.Split(list, ","), more...) {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := neturl.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("fence: endpoint %q: want a URL like http://127.0.0.1:7420", raw)
		}
		base := u.Scheme + "://" + u.Host + u.Path
		if !slices.Contains(out, base) {
			out = append(out, base)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("fence: endpoint %q: want a URL like http://127.0.0.1:7420", list)
	}
	return out, nil
}

// connectOptions are the Connect client options of cfg's protocol and
// headers.
func (cfg *config) connectOptions() []connect.ClientOption {
	var copts []connect.ClientOption
	switch cfg.protocol {
	case ProtocolGRPC:
		copts = append(copts, connect.WithGRPC())
	case ProtocolConnectJSON:
		copts = append(copts, connect.WithProtoJSON())
	}
	for _, f := range cfg.ctxHeaders {
		copts = append(copts, connect.WithInterceptors(ctxHeaderInterceptor(f)))
	}
	if len(cfg.headers) > 0 {
		copts = append(copts, connect.WithInterceptors(headerInterceptor(cfg.headers)))
	}
	return copts
}

// defaultHTTPClient returns an HTTP/1.1 client for Connect (HTTP/2 by ALPN
// over TLS), and an HTTP/2 client (h2c for http://) for gRPC; dial, if set,
// opens its connections; tlsCfg, if set, is its TLS config.
func defaultHTTPClient(p Protocol, dial dialFunc, tlsCfg *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	setTLS(t, tlsCfg)
	// Go's default keeps 2 idle connections per host: with more concurrent
	// calls (keepalives of many leases, parallel writes) connections would
	// be closed and reopened all the time.
	t.MaxIdleConnsPerHost = 256
	if p == ProtocolGRPC {
		t.Protocols = http2Only()
	}
	if dial != nil {
		t.DialContext = dial
	}
	return &http.Client{Transport: t}
}

// setTLS gives t the TLS config cfg (nil: Go's default, the system's
// roots). Go's transport offers h2 by ALPN when t.Protocols or
// ForceAttemptHTTP2 allow it, with a config given too.
func setTLS(t *http.Transport, cfg *tls.Config) {
	if cfg != nil {
		t.TLSClientConfig = cfg.Clone()
		t.ForceAttemptHTTP2 = true
	}
}

// checkTLS refuses an http:// endpoint when WithTLS was given: the Client
// would send in plain text what its user meant to protect.
func (cfg *config) checkTLS(urls []string) error {
	if cfg.tls == nil {
		return nil
	}
	for _, u := range urls {
		if strings.HasPrefix(u, "http://") {
			return fmt.Errorf("fence: endpoint %q: WithTLS was given: want an https:// URL", u)
		}
	}
	return nil
}

// http2Only is HTTP/2 only: over TLS for https://, cleartext with prior
// knowledge (h2c) for http://.
func http2Only() *http.Protocols {
	var ps http.Protocols
	ps.SetHTTP2(true)
	ps.SetUnencryptedHTTP2(true)
	return &ps
}

// Endpoint returns the URL the client talks to now (with several, the one
// in use).
func (c *Client) Endpoint() string { return c.pick().url }

// Endpoints returns the URLs of every endpoint, in the order given to New.
func (c *Client) Endpoints() []string {
	urls := make([]string, len(c.endpoints))
	for i, ep := range c.endpoints {
		urls[i] = ep.url
	}
	return urls
}

// pick returns the endpoint for the next attempt: the one in use.
func (c *Client) pick() *endpoint { return c.endpoints[c.cur.Load()] }

// failover moves off ep after it failed: to the next endpoint, unless
// another call has moved already (so that failures seen together by many
// calls move the Client once, not once each).
func (c *Client) failover(ep *endpoint) {
	if len(c.endpoints) == 1 {
		return
	}
	next := (ep.idx + 1) % int32(len(c.endpoints))
	if c.cur.CompareAndSwap(ep.idx, next) {
		c.cfg.logger.Info("fence: endpoint failed, moving to the next", "from", ep.url, "to", c.endpoints[next].url)
	}
}

// SessionID is the id of the Client's session on the server, 0 while none
// is open (before the first session-bound call, after the session ended and
// before the next call opens a new one, or with WithoutSession).
func (c *Client) SessionID() uint64 {
	if c.sess == nil {
		return 0
	}
	return c.sess.ID()
}

// Close ends every lease this client handed out (their Done channels close
// with ErrClientClosed) and closes idle connections. Standalone leases are
// not released on the server and expire by their TTL; the session is closed
// on the server (best effort: one attempt, waited for up to 5s), which
// releases all its leases at once. Calls made after Close fail with ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	leases := make([]*Lease, 0, len(c.leases))
	for l := range c.leases {
		leases = append(leases, l)
	}
	c.mu.Unlock()
	for _, l := range leases {
		l.stop(ErrClientClosed)
	}
	if c.sess != nil {
		c.sess.close()
	}
	c.cfg.httpClient.CloseIdleConnections()
	return nil
}

func (c *Client) track(l *Lease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClientClosed
	}
	c.leases[l] = struct{}{}
	return nil
}

func (c *Client) untrack(l *Lease) {
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
