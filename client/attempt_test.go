package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/testutil"
)

// holdProxy forwards HTTP requests to a real server, except the first
// `hold` requests to a path ending in /method, which it never answers (it
// keeps them until the test ends), as a server that accepted the connection
// and then stalled. answered is signalled each time a request to method was
// forwarded and its reply passed back.
type holdProxy struct {
	method   string
	hold     int
	proxy    *httputil.ReverseProxy
	stop     chan struct{}
	answered chan struct{}

	mu    sync.Mutex
	calls int
}

func newHoldProxy(t *testing.T, target, method string, hold int) (*holdProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{method: method, hold: hold, proxy: httputil.NewSingleHostReverseProxy(u),
		stop: make(chan struct{}), answered: make(chan struct{}, 100)}
	url := serveLoopback(t, p)
	t.Cleanup(func() { close(p.stop) }) // before the server closes: cleanups run last first
	return p, url
}

func (p *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/"+p.method) {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.calls++
	held := p.calls <= p.hold
	p.mu.Unlock()
	if held {
		select {
		case <-p.stop:
		case <-r.Context().Done():
		}
		return
	}
	p.proxy.ServeHTTP(w, r)
	p.answered <- struct{}{}
}

func (p *holdProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// TestAcquireAttemptBoundedByWait: an attempt of a waiting acquire that gets
// no answer is abandoned after wait + the attempt timeout and retried with
// the same request_id, instead of hanging until the caller's context ends.
func TestAcquireAttemptBoundedByWait(t *testing.T) {
	name := uniq(t)
	p, url := newHoldProxy(t, serverURL, "Acquire", 1)
	var log testutil.Buffer
	c := newClientFor(t, url, client.WithAttemptTimeout(200*time.Millisecond),
		client.WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	// The caller's context outlasts the 300ms bound by far, but ends before
	// the default attempt timeout (10s): a bound not applied fails here.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.Acquire(ctx, name, client.TTL(5*time.Second), client.Wait(100*time.Millisecond), client.KeepAlive(-1))
	if err != nil {
		t.Fatalf("acquire: %v (the stalled first attempt was never given up)", err)
	}
	defer l.Release(context.Background())
	if n := p.count(); n != 2 {
		t.Fatalf("%d acquire attempts reached the proxy, want 2 (one stalled, one retried)", n)
	}
	// The retry is logged with its number and why: the first attempt's
	// bound, wait + attempt timeout.
	if out := log.String(); !strings.Contains(out, "attempt=1") || !strings.Contains(out, "attempt timed out after 300ms") {
		t.Errorf("retry log %q: want attempt=1 and the 300ms bound", out)
	}
}

// TestKeepAliveAttemptTimesOut: a renewal that gets no answer is given up
// after TTL/3 and retried, so one stalled request does not lose the lease.
func TestKeepAliveAttemptTimesOut(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	name := uniq(t)
	p, url := newHoldProxy(t, serverURL, "Renew", 1)
	c := newClientFor(t, url, client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx := ctxFor(t)
	l, err := c.Acquire(ctx, name, client.TTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	select {
	case <-p.answered: // the retry after the stalled attempt was answered
	case <-l.Done():
		t.Fatalf("lease lost while its first renew stalled: %v (the renew attempt has no timeout of its own)", l.Err())
	}
	// The answered renew moves the deadline (extend runs right after the
	// reply is read; Renew is synchronous and orders after it).
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil || !l.Deadline().After(first) {
		t.Fatalf("after the retried renew: Err %v, deadline %v (first %v)", l.Err(), l.Deadline(), first)
	}
	if p.count() < 2 {
		t.Fatalf("%d renews reached the proxy, want the stalled one and a retry", p.count())
	}
	l.Release(ctx)
}

// TestRenewWithShorterTTLPullsDeadlineIn: when the lease's TTL is shortened
// on the server (a renew with a shorter --ttl elsewhere), the next renew of
// the lease moves its deadline earlier, not only later.
func TestRenewWithShorterTTLPullsDeadlineIn(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	l, err := c.Acquire(ctx, name, client.TTL(time.Minute), client.KeepAlive(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := newClient(t).Renew(ctx, name, l.Token(), time.Second); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if l.TTL() != time.Second {
		t.Errorf("TTL after renew %v, want 1s", l.TTL())
	}
	if d := l.Deadline(); d.After(after.Add(time.Second)) || d.Before(before) {
		t.Fatalf("deadline %v after the renew, want within [%v, %v] (renew sent in between, remaining ≤ 1s)",
			d.Sub(before), 0, after.Add(time.Second).Sub(before))
	}
}

// TestWriteUnderLostLeaseIsErrLeaseLost: a call made with a lost lease's
// context fails with an error that says so (errors.Is ErrLeaseLost), not
// only context.Canceled.
func TestWriteUnderLostLeaseIsErrLeaseLost(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	c := newClient(t)
	l := lostBehindItsBack(t, ctx, c, name)
	_, err := c.Write(l.Context(), name+"/res", l.Token(), []byte("8"))
	if !errors.Is(err, client.ErrLeaseLost) || !errors.Is(err, fence.ErrLeaseLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("write under a lost lease: %v, want errors.Is ErrLeaseLost and context.Canceled", err)
	}
	var lost *client.LostError
	if !errors.As(err, &lost) || lost.Token != l.Token() {
		t.Fatalf("errors.As LostError: %v", err)
	}
}

// delayProxy is a TCP proxy that holds every chunk the server sends for
// delay before passing it on: replies arrive delay after the server made
// them.
func delayProxy(t *testing.T, target string, delay time.Duration) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln := listenLoopback(t)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", u.Host)
			if err != nil {
				in.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(out, in); out.Close() }()
			go func() {
				defer wg.Done()
				defer in.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := out.Read(buf)
					if n > 0 {
						time.Sleep(delay) // the delay under test, not a synchronisation
						if _, werr := in.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestDeadlineCountsFromSendTime (G8): the safe deadline is counted from
// when the acquire was sent, not from when its reply arrived. With the
// reply held back 1s, send time + TTL is at most (return time - 1s) + TTL;
// a deadline counted from the reply would be about 1s later.
func TestDeadlineCountsFromSendTime(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	const delay, ttl = time.Second, 10 * time.Second
	ctx, name := ctxFor(t), uniq(t)
	c := newClientFor(t, delayProxy(t, serverURL, delay))
	l, err := c.Acquire(ctx, name, client.TTL(ttl), client.KeepAlive(-1))
	returned := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	defer newClient(t).Release(ctx, name, l.Token())
	if latest := returned.Add(-delay).Add(ttl); l.Deadline().After(latest) {
		t.Fatalf("deadline %v after return, later than send time + TTL ≤ %v after return: counted from the reply's arrival",
			l.Deadline().Sub(returned), latest.Sub(returned))
	}
}

// recorder is an http.RoundTripper that records the RPC method of every
// request, in the order the replies came back.
type recorder struct {
	mu      sync.Mutex
	methods []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	r.mu.Lock()
	r.methods = append(r.methods, req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:])
	r.mu.Unlock()
	return resp, err
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.methods...)
}

// TestWaitedGrantRenewedBeforeReturn: a lease granted after a wait is
// renewed before Acquire returns it, so that its deadline counts from a send
// time after the wait, not from the start of the wait.
func TestWaitedGrantRenewedBeforeReturn(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	a := newClient(t)
	held, err := a.Acquire(ctx, name, client.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	b := newClientFor(t, serverURL, client.WithHTTPClient(&http.Client{Transport: rec}))
	got := make(chan *client.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, name, client.TTL(2*time.Second), client.Wait(20*time.Second), client.KeepAlive(-1))
		errs <- err
		got <- l
	}()
	for {
		info, err := a.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond) // poll the queue: the server has no signal for it
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	l := <-got
	defer l.Release(ctx)
	if m := rec.list(); len(m) != 2 || m[0] != "Acquire" || m[1] != "Renew" {
		t.Fatalf("requests before the waited lease was returned: %q, want [Acquire Renew]", m)
	}
}

// TestFailFastUnreachable: with WithFailFast a call to an address where
// nothing listens fails at once with *UnreachableError naming the address,
// while the caller's context is still live; without it the call retries
// until the context ends.
func TestFailFastUnreachable(t *testing.T) {
	ln := listenLoopback(t)
	addr := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	ctx := ctxFor(t)
	_, err := newClientFor(t, addr, client.WithFailFast()).Read(ctx, "x")
	var un *client.UnreachableError
	if !errors.As(err, &un) || un.URL != addr || ctx.Err() != nil {
		t.Fatalf("fail-fast read: %v (ctx %v), want *UnreachableError for %s before the context ends", err, ctx.Err(), addr)
	}
	if want := "fence: cannot reach the server at " + addr + ": connect: connection refused"; err.Error() != want {
		t.Errorf("message %q, want %q (the cause without the transport's wrapping)", err, want)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = newClientFor(t, addr).Read(short, "x")
	if errors.As(err, &un) || short.Err() == nil {
		t.Fatalf("read without fail-fast: %v, want retries until the context ended", err)
	}
}

// TestResourceExhaustedNotRetried: a limit answer (resource_exhausted) is
// returned to the caller after one attempt, not retried.
func TestResourceExhaustedNotRetried(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	url := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"code":"resource_exhausted","message":"waiters on lock \"x\": at most 1024"}`)
	}))
	c := newClientFor(t, url)
	_, err := c.Acquire(ctxFor(t), "x", client.TTL(time.Second), client.Wait(time.Second))
	if err == nil || errors.Is(err, fence.ErrBusy) {
		t.Fatalf("acquire: %v, want the limit error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d attempts, want 1 (a limit is not retried)", calls)
	}
}
