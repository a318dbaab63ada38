package bench

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/fenceworks/fence/client"
)

func init() { Register(fenceSession{}) }

// fenceSession is the Fence Go client's session path (issue 7): one
// session per client.Client — one TTL and one keepalive for all its
// leases, every call on one bidi stream — and session-bound leases
// (Acquire without TTL or KeepAlive). Workers get a Client each, up to
// maxSessions; workers beyond share them.
type fenceSession struct{}

func (fenceSession) Name() string   { return "fence-session" }
func (fenceSession) Server() string { return "fence" }
func (fenceSession) Fenced() bool   { return true }

func (fenceSession) Open(ctx context.Context, addr string, workers int) (Client, error) {
	return &fenceSessionClient{addr: addr, clients: map[int]*client.Client{}, scheme: "http"}, nil
}

// EndpointsInOrder (-fence-in-order) gives the Fence systems' Clients
// client.WithEndpointsInOrder: every Client starts at the first endpoint
// (the leader, or a follower with -via-follower) instead of the client's
// own choice (the leader it finds).
var EndpointsInOrder bool

type fenceSessionClient struct {
	addr    string
	scheme  string          // "http", or "https" for fence-session-tls
	opts    []client.Option // more client options (TLS)
	mu      sync.Mutex
	clients map[int]*client.Client
}

func (f *fenceSessionClient) Worker(ctx context.Context, i int) (Worker, error) {
	k := i % maxSessions
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.clients[k]
	if !ok {
		var err error
		opts := append([]client.Option{client.WithSessionTTL(time.Duration(sessionTTL) * time.Second)}, f.opts...)
		if EndpointsInOrder {
			opts = append(opts, client.WithEndpointsInOrder())
		}
		c, err = client.New(schemeURLs(f.scheme, f.addr), opts...)
		if err != nil {
			return nil, err
		}
		f.clients[k] = c
	}
	return &fenceSessionWorker{c: c}, nil
}

func (f *fenceSessionClient) Queued(ctx context.Context, prefix string, locks int) (int, error) {
	if f.scheme == "https" {
		cfg, err := benchClientTLS()
		if err != nil {
			return 0, err
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		return fenceWaitersAt(ctx, hc, "https://"+f.addr)
	}
	return fenceWaiters(ctx, f.addr)
}

func (f *fenceSessionClient) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.clients {
		_ = c.Close()
	}
	return nil
}

type fenceSessionWorker struct {
	c    *client.Client
	mu   sync.Mutex
	last *client.Lease
}

// Acquire takes a session-bound lease: no TTL (the session's), no
// keepalive of its own. o.TTL, o.Deadline and o.Hold do not apply.
func (w *fenceSessionWorker) Acquire(ctx context.Context, name string, o AcquireOpts) (Held, error) {
	opts := []client.AcquireOption{client.Owner("bench")}
	if o.Wait > 0 {
		opts = append(opts, client.Wait(o.Wait))
	}
	l, err := w.c.Acquire(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.last = l
	w.mu.Unlock()
	return fenceHeld{c: w.c, l: l}, nil
}

// Expire returns the latest safe deadline of the session's leases (the
// client's, from its last keepalive); the runner then kills the process,
// which stops the keepalives.
func (w *fenceSessionWorker) Expire(ctx context.Context) (time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		return time.Time{}, nil
	}
	return w.last.Deadline(), nil
}

func (w *fenceSessionWorker) Close() error { return nil }
