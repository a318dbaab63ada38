package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// keptClient is one client on one kept-alive connection.
type keptClient struct {
	hc *http.Client
	lc fencev1connect.LockServiceClient
}

func newKeptClient(url string) keptClient {
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	return keptClient{hc: hc, lc: fencev1connect.NewLockServiceClient(hc, url)}
}

// acquire acquires name and reports whether the call reused the client's
// connection (false: it dialled a new one).
func (k keptClient) acquire(t *testing.T, name string) (reused bool) {
	t.Helper()
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	})
	if _, err := k.lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return reused
}

// Sockets that connect and say nothing cannot hold the connection cap
// against clients: with every slot taken, a newcomer takes the slot of the
// oldest silent connection, never one a client's request came on, and a
// silent connection is closed after the unproven timeout even when the
// header timeout is long. (Before: --max-conns filled with idle sockets
// kept honest clients, /healthz included, waiting.)
func TestConnCapFavoursClients(t *testing.T) {
	const max = 4
	s, url := startServerWith(t, Config{MaxConns: max, ReadHeaderTimeout: time.Hour, UnprovenTimeout: time.Hour})
	clients := []keptClient{newKeptClient(url), newKeptClient(url)}
	for i, c := range clients {
		defer c.hc.CloseIdleConnections()
		c.acquire(t, fmt.Sprint("client-", i, "-first"))
	}
	// A flood of silent sockets, many more than the free slots.
	const silent = max + 2
	for range silent {
		c, _ := rawConn(t, url)
		defer c.Close()
	}
	until(t, "the silent sockets to be accepted, evicting each other", func() bool { return s.conns.evicted.Load() >= silent-2 })
	// A newcomer is served at once (it evicts a silent socket; with the
	// old cap it waited for the header timeout, an hour here).
	newcomer := newKeptClient(url)
	defer newcomer.hc.CloseIdleConnections()
	done := make(chan struct{})
	go func() {
		defer close(done)
		newcomer.acquire(t, "newcomer")
	}()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("a new client was not served while silent sockets held the cap (evicted %d)", s.conns.evicted.Load())
	}
	// The clients' connections were never the ones closed.
	for i, c := range clients {
		if !c.acquire(t, fmt.Sprint("client-", i, "-again")) {
			t.Errorf("client %d had to dial again: its connection, proven by a request, was evicted for a silent one", i)
		}
	}
	if open := s.conns.open.Load(); open > max {
		t.Errorf("%d connections open, cap %d", open, max)
	}
}

// A connection no request came on is closed after UnprovenTimeout, even
// with a longer header timeout; one a request came on lives on.
func TestUnprovenConnectionsAreClosedSooner(t *testing.T) {
	s, url := startServerWith(t, Config{ReadHeaderTimeout: time.Hour, UnprovenTimeout: 200 * time.Millisecond, IdleTimeout: time.Hour})
	silent, r := rawConn(t, url)
	untilClosed(t, silent, r)
	if n := s.conns.expired.Load(); n != 1 {
		t.Fatalf("fence_http_connections_unproven_closed_total = %d, want 1", n)
	}
	c := newKeptClient(url)
	defer c.hc.CloseIdleConnections()
	c.acquire(t, "a")
	// Longer than UnprovenTimeout: wait for a silent socket opened after
	// the client's request to be closed by it.
	late, r2 := rawConn(t, url)
	untilClosed(t, late, r2)
	if !c.acquire(t, "b") {
		t.Fatal("the client's connection, proven by its request, was closed as unproven")
	}
}

// With authentication on, only a call whose caller authenticated proves
// a connection: one that only sends a wrong token stays unproven and is
// closed after UnprovenTimeout; one with a valid token keeps its slot.
func TestAuthProvesConnections(t *testing.T) {
	f := newAuthFixtureWith(t, Config{ReadHeaderTimeout: time.Hour, UnprovenTimeout: 300 * time.Millisecond, IdleTimeout: time.Hour})
	var tryCall func(hc *http.Client, auth string) (bool, int, error)
	call := func(hc *http.Client, auth string) (reused bool, code int) {
		reused, code, err := tryCall(hc, auth)
		if err != nil {
			t.Fatal(err)
		}
		return reused, code
	}
	tryCall = func(hc *http.Client, auth string) (reused bool, code int, err error) {
		t.Helper()
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+fencev1connect.LockServiceGetProcedure, strings.NewReader(`{"name":"jobs/a"}`))
		if err != nil {
			return false, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			return reused, 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return reused, resp.StatusCode, nil
	}
	kept := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	}
	good, bad := kept(), kept()
	defer good.CloseIdleConnections()
	defer bad.CloseIdleConnections()
	if _, code := call(good, f.creds["read"]); code != http.StatusOK {
		t.Fatalf("valid token: %d", code)
	}
	before := f.s.conns.expired.Load()
	if _, code := call(bad, f.creds["wrong"]); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", code)
	}
	until(t, "the wrong token's connection to be closed as unproven", func() bool { return f.s.conns.expired.Load() > before })
	// The closed connection: the next call fails on it (EOF, when the
	// client had not yet seen the close) or dials a new one.
	if reused, code, err := tryCall(bad, f.creds["wrong"]); err == nil && (reused || code != http.StatusUnauthorized) {
		t.Fatalf("after the unproven timeout the wrong token's call reused its connection (%v, %d): it was never closed", reused, code)
	}
	if reused, code := call(good, f.creds["read"]); !reused || code != http.StatusOK {
		t.Fatalf("the valid token's connection was closed (reused %v, %d): an authenticated call proves it", reused, code)
	}
}

// With authentication on, one principal holds at most
// MaxConnsPerPrincipal connections: its call on one more is refused
// RESOURCE_EXHAUSTED naming the quota, another principal is served, and a
// connection closed gives its place back.
func TestConnsPerPrincipal(t *testing.T) {
	const max = 2
	f := newAuthFixtureWith(t, Config{MaxConnsPerPrincipal: max})
	get := func(hc *http.Client, auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, f.url+fencev1connect.LockServiceGetProcedure, strings.NewReader(`{"name":"jobs/a"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	kept := func() *http.Client {
		return &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	}
	var mine []*http.Client
	for range max {
		hc := kept()
		defer hc.CloseIdleConnections()
		if code, body := get(hc, f.creds["read"]); code != http.StatusOK {
			t.Fatalf("connection %d of the principal: %d %s", len(mine)+1, code, body)
		}
		mine = append(mine, hc)
	}
	extra := kept()
	defer extra.CloseIdleConnections()
	code, body := get(extra, f.creds["read"])
	if code != http.StatusTooManyRequests || !strings.Contains(body, "max_conns_per_principal") || !strings.Contains(body, "RESOURCE_EXHAUSTED") {
		t.Fatalf("the principal's call on connection %d: %d %s, want 429 RESOURCE_EXHAUSTED naming max_conns_per_principal", max+1, code, body)
	}
	other := kept()
	defer other.CloseIdleConnections()
	if code, body := get(other, f.creds["admin"]); code != http.StatusOK {
		t.Fatalf("another principal while the first is at its quota: %d %s", code, body)
	}
	// A connection of the principal closed: its place comes back.
	mine[0].CloseIdleConnections()
	until(t, "a new connection of the principal to be served after one closed", func() bool {
		c, _ := get(kept(), f.creds["read"])
		return c == http.StatusOK
	})
}

// A role's own connection quota (SetRoleQuota conns) replaces the flag's
// for its principals: "lock" (role locker, conns=1) is refused its second
// connection while "read" (reader, no role quota) keeps the flag's 2.
func TestConnsPerPrincipalRoleQuota(t *testing.T) {
	f := newAuthFixtureWith(t, Config{MaxConnsPerPrincipal: 2})
	f.must(fencev1connect.AuthServiceSetRoleQuotaProcedure, f.creds["admin"], `{"role":"locker","quota":{"conns":1}}`)
	get := func(hc *http.Client, auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, f.url+fencev1connect.LockServiceAcquireProcedure, strings.NewReader(`{"name":"jobs/x","ttl":60}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	kept := func() *http.Client {
		hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
		t.Cleanup(hc.CloseIdleConnections)
		return hc
	}
	if code, body := get(kept(), f.creds["lock"]); code != http.StatusOK && code != http.StatusConflict {
		t.Fatalf("lock's first connection: %d %s", code, body)
	}
	code, body := get(kept(), f.creds["lock"])
	if code != http.StatusTooManyRequests || !strings.Contains(body, "at most 1") || !strings.Contains(body, "max_conns_per_principal") {
		t.Fatalf("lock's second connection under its role's conns=1: %d %s", code, body)
	}
	for i := range 2 {
		if code, body := get(kept(), f.creds["read"]); code == http.StatusTooManyRequests {
			t.Fatalf("read's connection %d under the flag's 2: %d %s", i+1, code, body)
		}
	}
}
