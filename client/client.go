package client

import (
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"sync"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Client talks to a Fence server. It is safe for concurrent use. Close it
// when done: Close ends every lease it handed out and its session.
type Client struct {
	cfg       config
	endpoints []*endpoint
	sess      *session // nil with WithoutSession

	mu     sync.Mutex
	leases map[*Lease]struct{}
	closed bool
}

// endpoint is one server address and its API stubs. Today a Client has one;
// failover across several will pick among them in pick.
type endpoint struct {
	url       string
	locks     fencev1connect.LockServiceClient
	resources fencev1connect.ResourceServiceClient
}

// ErrClientClosed is the reason a lease is lost when its Client was closed,
// and the error of calls made after Close.
var ErrClientClosed = errors.New("fence: client closed")

// New returns a Client for the server at url, a URL such as
// "http://127.0.0.1:7420". It does not connect until the first call.
func New(url string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	u, err := neturl.Parse(url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("fence: endpoint %q: want a URL like http://127.0.0.1:7420", url)
	}
	if !cfg.noSession {
		if err := fence.ValidateTTL(cfg.sessionTTL, maxDuration); err != nil {
			return nil, err
		}
	}
	if cfg.httpClient == nil {
		cfg.httpClient = defaultHTTPClient(cfg.protocol)
	}
	var copts []connect.ClientOption
	switch cfg.protocol {
	case ProtocolGRPC:
		copts = append(copts, connect.WithGRPC())
	case ProtocolConnectJSON:
		copts = append(copts, connect.WithProtoJSON())
	}
	base := u.Scheme + "://" + u.Host + u.Path
	ep := &endpoint{
		url:       base,
		locks:     fencev1connect.NewLockServiceClient(cfg.httpClient, base, copts...),
		resources: fencev1connect.NewResourceServiceClient(cfg.httpClient, base, copts...),
	}
	c := &Client{cfg: cfg, endpoints: []*endpoint{ep}, leases: map[*Lease]struct{}{}}
	if !cfg.noSession {
		c.sess = newSession(c, base, copts)
	}
	return c, nil
}

// defaultHTTPClient returns an HTTP/1.1 client for Connect, and an HTTP/2
// client (h2c for http://) for gRPC.
func defaultHTTPClient(p Protocol) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Go's default keeps 2 idle connections per host: with more concurrent
	// calls (keepalives of many leases, parallel writes) connections would
	// be closed and reopened all the time.
	t.MaxIdleConnsPerHost = 256
	if p == ProtocolGRPC {
		var ps http.Protocols
		ps.SetHTTP2(true)
		ps.SetUnencryptedHTTP2(true)
		t.Protocols = &ps
	}
	return &http.Client{Transport: t}
}

// Endpoint returns the URL the client talks to.
func (c *Client) Endpoint() string { return c.pick().url }

// pick returns the endpoint for the next attempt.
func (c *Client) pick() *endpoint { return c.endpoints[0] }

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
