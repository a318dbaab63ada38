package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenceworks/fence/client"
)

func init() { Register(fenceUnary{}) }

// fenceUnary is the Fence Go client (package client) as it is used today:
// one unary call per operation (Connect over HTTP/1.1 keep-alive), one
// lease per Acquire, renewed in the background at TTL/3 unless held
// without keepalive (AcquireOpts.Hold). Clients with more than
// manyWorkers workers (the storm's waiters: one blocking call each) speak
// gRPC over h2c instead, so that their calls share a few connections.
type fenceUnary struct{}

const manyWorkers = 1000

func (fenceUnary) Name() string   { return "fence-unary" }
func (fenceUnary) Server() string { return "fence" }
func (fenceUnary) Fenced() bool   { return true }

func (fenceUnary) Open(ctx context.Context, addr string, workers int) (Client, error) {
	// WithoutSession: every lease standalone with its own keepalive, one
	// unary call per operation — the client before sessions.
	opts := []client.Option{client.WithoutSession()}
	if workers > manyWorkers {
		opts = append(opts, client.WithProtocol(client.ProtocolGRPC))
	}
	if EndpointsInOrder {
		opts = append(opts, client.WithEndpointsInOrder())
	}
	c, err := client.New(fenceURLs(addr), opts...)
	if err != nil {
		return nil, err
	}
	return &fenceClient{c: c, addr: addr}, nil
}

// fenceURLs is the Fence client's endpoint list for addr (host:port, or a
// cluster's comma-separated host:ports): "http://a,http://b,...".
func fenceURLs(addr string) string { return schemeURLs("http", addr) }

// schemeURLs is fenceURLs with another scheme ("https").
func schemeURLs(scheme, addr string) string {
	var us []string
	for _, a := range strings.Split(addr, ",") {
		us = append(us, scheme+"://"+a)
	}
	return strings.Join(us, ",")
}

type fenceClient struct {
	c    *client.Client
	addr string
}

func (f *fenceClient) Worker(ctx context.Context, i int) (Worker, error) {
	return fenceWorker{f.c}, nil
}
func (f *fenceClient) Close() error { return f.c.Close() }

// Queued reads the server's fence_waiters gauge (all locks; the runner's
// servers serve one workload at a time).
func (f *fenceClient) Queued(ctx context.Context, prefix string, locks int) (int, error) {
	return fenceWaiters(ctx, f.addr)
}

func fenceWaiters(ctx context.Context, addr string) (int, error) {
	return fenceWaitersAt(ctx, http.DefaultClient, "http://"+addr)
}

// fenceWaitersAt reads the fence_waiters gauge of the server at base
// (scheme://host:port) with hc.
func fenceWaitersAt(ctx context.Context, hc *http.Client, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "fence_waiters "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(n), err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no fence_waiters in %s/metrics", base)
}

type fenceWorker struct{ c *client.Client }

func (w fenceWorker) Acquire(ctx context.Context, name string, o AcquireOpts) (Held, error) {
	opts := []client.AcquireOption{client.TTL(ttlFor(o, client.DefaultTTL)), client.Owner("bench")}
	if o.Wait > 0 {
		opts = append(opts, client.Wait(o.Wait))
	}
	if o.Hold {
		opts = append(opts, client.KeepAlive(-1))
	}
	l, err := w.c.Acquire(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	return fenceHeld{c: w.c, l: l}, nil
}

func (fenceWorker) Expire(ctx context.Context) (time.Time, error) { return time.Time{}, nil }
func (fenceWorker) Close() error                                  { return nil }

type fenceHeld struct {
	c *client.Client
	l *client.Lease
}

// Write is a fenced write to the server's built-in store with the lease's
// token.
func (h fenceHeld) Write(ctx context.Context, key string, val []byte) error {
	_, err := h.c.Write(ctx, key, h.l.Token(), val)
	return err
}

func (h fenceHeld) Release(ctx context.Context) error { return h.l.Release(ctx) }
