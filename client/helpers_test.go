package client_test

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// newClient returns a client for the shared server, closed at cleanup.
func newClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	return newClientFor(t, serverURL, opts...)
}

func newClientFor(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// uniq returns a lock or resource name no other test uses.
func uniq(t *testing.T) string {
	return t.Name() + "/" + strings.ToLower(rand.Text()[:8])
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// lossyProxy forwards requests to a real server; for the first request to a
// path ending in method it forwards the request (so the server applies it)
// and then throws the reply away and answers 503, as a lost reply.
type lossyProxy struct {
	method string
	proxy  *httputil.ReverseProxy
	target *url.URL
	// afterLoss, if set, runs after the server applied the first request
	// and before its reply is lost.
	afterLoss func()

	mu    sync.Mutex
	calls int
}

func newLossyProxy(t *testing.T, target, method string) (*lossyProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{method: method, target: u, proxy: httputil.NewSingleHostReverseProxy(u)}
	return p, serveLoopback(t, p)
}

// serveLoopback serves h on a loopback port until the test ends and
// returns its URL.
func serveLoopback(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h}
	ln := listenLoopback(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/"+p.method) {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if !first {
		p.proxy.ServeHTTP(w, r)
		return
	}
	// Forward, let the server apply it, and lose the reply.
	body, _ := io.ReadAll(r.Body)
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target.String()+r.URL.Path, strings.NewReader(string(body)))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if p.afterLoss != nil {
		p.afterLoss()
	}
	http.Error(w, "reply lost", http.StatusServiceUnavailable)
}

func (p *lossyProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// leaseCause is context.Cause of the lease's context.
func leaseCause(l *client.Lease) error { return context.Cause(l.Context()) }

// waitDone waits for l to end; a lease that has not ended by the end of ctx
// fails its test instead of hanging the run.
func waitDone(t *testing.T, ctx context.Context, l *client.Lease) {
	t.Helper()
	select {
	case <-l.Done():
	case <-ctx.Done():
		t.Fatalf("lease %d still not ended: %v", l.Token(), ctx.Err())
	}
}

// lostBehindItsBack acquires name on c with a fast keepalive, then has
// another client release it with its token, so the next background renew
// is refused; it returns the lease once it has ended.
func lostBehindItsBack(t *testing.T, ctx context.Context, c *client.Client, name string) *client.Lease {
	t.Helper()
	l, err := c.Acquire(ctx, name, client.TTL(10*time.Second), client.KeepAlive(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := newClient(t).Release(ctx, name, l.Token()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ctx, l)
	return l
}
