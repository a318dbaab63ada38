package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// startServer runs a real server over the in-memory service and fakes of
// testdeps_test.go on a loopback port and returns its base URL.
func startServer(tb testing.TB) (*Server, string) {
	tb.Helper()
	return startServerWith(tb, Config{})
}

// startServerWith is startServer with cfg (Logger is filled in when
// empty).
func startServerWith(tb testing.TB, cfg Config) (*Server, string) {
	tb.Helper()
	return startServerOver(tb, cfg, state.Config{})
}

// startServerRules is startServer over a node that records rules.
func startServerRules(tb testing.TB, rules state.Config) (*Server, string) {
	tb.Helper()
	return startServerOver(tb, Config{}, rules)
}

// startServerOver is startServerWith over a store that records rules (the
// zero value: state.DefaultConfig()).
func startServerOver(tb testing.TB, cfg Config, rules state.Config) (*Server, string) {
	tb.Helper()
	return serveOn(tb, cfg, rules, newOverFake)
}

// startServerOnNode is startServerWith over a real single node (durable
// raft in a temp dir, testnode_test.go), for the tests of what only a
// node gives: its metrics and its membership.
func startServerOnNode(tb testing.TB, cfg Config) (*Server, string) {
	tb.Helper()
	return serveOn(tb, cfg, state.Config{}, newOverNode)
}

// startServerDeps is startServerWith over the fakes of newOverFake as
// change alters them (a hand-written fake where one answer matters).
func startServerDeps(tb testing.TB, cfg Config, change func(*Deps)) (*Server, string) {
	tb.Helper()
	return serveOn(tb, cfg, state.Config{}, func(tb testing.TB, cfg Config, rules state.Config) (*Server, error) {
		return newOverFakeWith(tb, cfg, rules, change)
	})
}

// serveOn builds a server with build and serves it on a loopback port
// until cleanup.
func serveOn(tb testing.TB, cfg Config, rules state.Config, build func(testing.TB, Config, state.Config) (*Server, error)) (*Server, string) {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := build(tb, cfg, rules)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	// The testing package keeps a finished cleanup in its slice's backing
	// array, so a closure holding s would keep the closed server (and
	// its state) reachable into the next benchmark run; hold it in a box
	// that the cleanup empties.
	box := &struct{ s *Server }{s}
	tb.Cleanup(func() {
		s := box.s
		box.s = nil
		closeIdleClients()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge), as gRPC clients do.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tracked(&http.Transport{Protocols: p})}
}

// h2Transports are the HTTP/2 client transports the tests made: a server's
// cleanup closes their idle connections before its Shutdown, which
// otherwise waits out HTTP/2's GOAWAY grace (a second) for every
// connection a client left open.
var h2Transports struct {
	sync.Mutex
	ts []*http.Transport
}

func tracked(t *http.Transport) *http.Transport {
	h2Transports.Lock()
	h2Transports.ts = append(h2Transports.ts, t)
	h2Transports.Unlock()
	return t
}

// closeIdleClients closes the idle connections of every tracked transport.
func closeIdleClients() {
	h2Transports.Lock()
	defer h2Transports.Unlock()
	for _, t := range h2Transports.ts {
		t.CloseIdleConnections()
	}
}

type clients struct {
	name  string
	locks fencev1connect.LockServiceClient
	res   fencev1connect.ResourceServiceClient
}

func protocols(url string) []clients {
	h1 := &http.Client{Transport: &http.Transport{}}
	h2 := h2cClient()
	return []clients{
		{"connect-json", fencev1connect.NewLockServiceClient(h1, url, connect.WithProtoJSON()), fencev1connect.NewResourceServiceClient(h1, url, connect.WithProtoJSON())},
		{"grpc-h2c", fencev1connect.NewLockServiceClient(h2, url, connect.WithGRPC()), fencev1connect.NewResourceServiceClient(h2, url, connect.WithGRPC())},
	}
}

// The paused-worker story (docs/story.md) through each protocol: acquire, write, the lease moves on,
// the old owner's write is refused with both tokens.
func TestLockAndResourceFlow(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			lock, res := "sku-"+c.name, "stock-"+c.name
			a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: lock, Owner: "A", Ttl: durationpb.New(time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			ta := a.Msg.Lease.Token
			if a.Msg.Lease.Owner != "A" || a.Msg.Lease.Ttl.AsDuration() != time.Hour || a.Msg.Lease.Remaining.AsDuration() <= 0 {
				t.Fatalf("lease = %v", a.Msg.Lease)
			}
			// B is refused while A holds it: BUSY with the holder's facts.
			_, err = c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: lock, Owner: "B", Ttl: durationpb.New(time.Hour)}))
			var busy *fence.BusyError
			if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.As(apierr.FromConnect(err), &busy) || busy.Holder != "A" || busy.Token != fence.Token(ta) {
				t.Fatalf("second acquire = %v, want BUSY held by A with token %d", err, ta)
			}
			rn, err := c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: lock, Token: ta, Ttl: durationpb.New(2 * time.Hour)}))
			if err != nil || rn.Msg.Lease.Ttl.AsDuration() != 2*time.Hour {
				t.Fatalf("renew = %v, %v", rn, err)
			}
			if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: ta, Value: []byte("10")})); err != nil {
				t.Fatal(err)
			}
			g, err := c.locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: lock}))
			if err != nil || g.Msg.Lock.Lease.GetToken() != ta || g.Msg.Lock.LastToken != ta {
				t.Fatalf("get = %v, %v", g, err)
			}
			l, err := c.locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{Prefix: lock}))
			if err != nil || len(l.Msg.Locks) != 1 || l.Msg.Locks[0].Name != lock {
				t.Fatalf("list = %v, %v", l, err)
			}
			if _, err := c.locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: lock, Token: ta})); err != nil {
				t.Fatal(err)
			}
			// B takes over (same request_id twice: the same lease) and writes.
			breq := &fencev1.AcquireRequest{Name: lock, Owner: "B", Ttl: durationpb.New(time.Hour), RequestId: "b-" + c.name}
			b, err := c.locks.Acquire(ctx, connect.NewRequest(breq))
			if err != nil {
				t.Fatal(err)
			}
			b2, err := c.locks.Acquire(ctx, connect.NewRequest(breq))
			if err != nil || b2.Msg.Lease.Token != b.Msg.Lease.Token {
				t.Fatalf("retried acquire = %v, %v; want token %d again", b2, err, b.Msg.Lease.Token)
			}
			tb := b.Msg.Lease.Token
			w, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: tb, Value: []byte("8"), OpId: "b-w1"}))
			if err != nil || w.Msg.State.LastToken != tb {
				t.Fatalf("B's write = %v, %v", w, err)
			}
			// A wakes up and writes with its old token: refused.
			_, err = c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: ta, Value: []byte("5")}))
			var stale *fence.StaleTokenError
			if connect.CodeOf(err) != connect.CodeFailedPrecondition || !errors.As(apierr.FromConnect(err), &stale) ||
				stale.Token != fence.Token(ta) || stale.LastAccepted != fence.Token(tb) {
				t.Fatalf("stale write = %v, want STALE_TOKEN %d < %d", err, ta, tb)
			}
			want := "token " + fence.Token(ta).String() + " is older than accepted token " + fence.Token(tb).String()
			if ce := new(connect.Error); !errors.As(err, &ce) || ce.Message() != want {
				t.Fatalf("message = %v, want %q", err, want)
			}
			// B's retry with the same op_id is not applied again; Add works.
			w2, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: res, Token: tb, Value: []byte("8"), OpId: "b-w1"}))
			if err != nil || !w2.Msg.Replayed || w2.Msg.State.Version != w.Msg.State.Version {
				t.Fatalf("replayed write = %v, %v", w2, err)
			}
			ad, err := c.res.Add(ctx, connect.NewRequest(&fencev1.AddRequest{Resource: res + "-n", Token: tb, Delta: 9}))
			if err != nil || ad.Msg.Value != 9 {
				t.Fatalf("add = %v, %v", ad, err)
			}
			rd, err := c.res.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: res}))
			if err != nil || string(rd.Msg.State.Value) != "8" || rd.Msg.State.LastToken != tb {
				t.Fatalf("read = %v, %v; want value 8 with last token %d", rd, err, tb)
			}
		})
	}
}

// A plain JSON POST, as curl sends it.
func TestPlainJSONPost(t *testing.T) {
	_, url := startServer(t)
	body := `{"name":"sku-42","owner":"a","ttl":"5s"}`
	resp, err := http.Post(url+"/fence.v1.LockService/Acquire", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Lease struct {
			Name, Owner, Ttl, Remaining string
			Token                       uint64 // a JSON number (docs/api.md)
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, decode %v", resp.StatusCode, err)
	}
	if out.Lease.Name != "sku-42" || out.Lease.Token != 1 || out.Lease.Ttl != "5s" {
		t.Fatalf("lease = %+v", out.Lease)
	}
}

// Every out-of-bounds input is refused with invalid_argument, a detail naming
// the field, over JSON and gRPC; the server keeps serving.
func TestBadInput(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	ttl := durationpb.New(time.Second)
	big := strings.Repeat("x", 513)
	cases := []struct {
		name, field string
		call        func(c clients) error
	}{
		{"ttl 5ms", "ttl", acq(&fencev1.AcquireRequest{Name: "n", Ttl: durationpb.New(5 * time.Millisecond)})},
		{"ttl 25h", "ttl", acq(&fencev1.AcquireRequest{Name: "n", Ttl: durationpb.New(25 * time.Hour)})},
		{"missing ttl", "ttl", acq(&fencev1.AcquireRequest{Name: "n"})},
		{"wait -1s", "wait", acq(&fencev1.AcquireRequest{Name: "n", Ttl: ttl, Wait: durationpb.New(-time.Second)})},
		{"wait 25h", "wait", acq(&fencev1.AcquireRequest{Name: "n", Ttl: ttl, Wait: durationpb.New(25 * time.Hour)})},
		{"lock_delay 25h", "lock_delay", acq(&fencev1.AcquireRequest{Name: "n", Ttl: ttl, LockDelay: durationpb.New(25 * time.Hour)})},
		{"empty name", "name", acq(&fencev1.AcquireRequest{Name: "", Ttl: ttl})},
		{"513-byte name", "name", acq(&fencev1.AcquireRequest{Name: big, Ttl: ttl})},
		{"257-byte owner", "owner", acq(&fencev1.AcquireRequest{Name: "n", Owner: strings.Repeat("o", 257), Ttl: ttl})},
		{"value 1MiB+1", "value", func(c clients) error {
			_, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: "r", Token: 1, Value: make([]byte, fence.MaxValueBytes+1)}))
			return err
		}},
		{"token 0", "token", func(c clients) error {
			_, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: "r", Token: 0}))
			return err
		}},
		{"renew token 0", "token", func(c clients) error {
			_, err := c.locks.Renew(ctx, connect.NewRequest(&fencev1.RenewRequest{Name: "n", Token: 0}))
			return err
		}},
		{"257-byte op_id", "op_id", func(c clients) error {
			_, err := c.res.Add(ctx, connect.NewRequest(&fencev1.AddRequest{Resource: "r", Token: 1, OpId: strings.Repeat("i", 257)}))
			return err
		}},
	}
	for _, c := range protocols(url) {
		for _, tc := range cases {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				checkInvalid(t, tc.call(c), tc.field)
			})
		}
		// Still serving.
		if _, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "alive-" + c.name, Ttl: ttl})); err != nil {
			t.Fatalf("%s: server not serving after bad input: %v", c.name, err)
		}
	}
}

func acq(req *fencev1.AcquireRequest) func(c clients) error {
	return func(c clients) error {
		_, err := c.locks.Acquire(context.Background(), connect.NewRequest(req))
		return err
	}
}

func checkInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
	var inv *fence.InvalidError
	if !errors.As(apierr.FromConnect(err), &inv) || inv.Field != field || inv.Bound == "" {
		t.Fatalf("err = %v, want an INVALID_ARGUMENT detail for field %q with a bound", err, field)
	}
}

// Inputs only a raw body can carry: invalid UTF-8 in a name (binary
// protobuf; proto3 strings must be UTF-8, so protobuf's decoder refuses it
// before the handler: Connect's invalid_argument without a Fence detail) and
// malformed JSON (the same).
func TestBadInputRaw(t *testing.T) {
	_, url := startServer(t)
	// Field 1 (name), wire type 2, length 2, bytes ff fe; field 3 (ttl) 1s.
	msg := []byte{0x0a, 0x02, 0xff, 0xfe, 0x1a, 0x02, 0x08, 0x01}
	resp, err := http.Post(url+"/fence.v1.LockService/Acquire", "application/proto", bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_argument") {
		t.Fatalf("invalid UTF-8 name: status %d body %s; want 400 invalid_argument", resp.StatusCode, body)
	}

	resp, err = http.Post(url+"/fence.v1.LockService/Acquire", "application/json", strings.NewReader(`{"name": "x", "ttl": `))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct{ Code string }
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Code != "invalid_argument" {
		t.Fatalf("malformed JSON: status %d body %s; want 400 invalid_argument", resp.StatusCode, body)
	}
	resp, err = http.Post(url+"/fence.v1.LockService/Acquire", "application/json", strings.NewReader(`{"name":"ok","ttl":"1s"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after bad input: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestHealthReadyMetrics(t *testing.T) {
	s, url := startServerOnNode(t, Config{}) // the node's readiness and gauges
	get := func(path string) (int, string) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	c := protocols(url)[0]
	if _, err := c.locks.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: "m", Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	code, body := get("/metrics")
	for _, want := range []string{
		`fence_requests_total{code="ok",procedure="/fence.v1.LockService/Acquire"} 1`,
		"fence_leases_held 1", "fence_last_token 1", "fence_waiters 0", "fence_ticks_total", "fence_expiry_slack_seconds",
		"fence_raft_apply_duration_seconds_count 1", "fence_request_duration_seconds_bucket", "fence_ready 1",
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q", code, want)
		}
	}
	// Once shutdown starts, /readyz says so.
	s.drainOnce.Do(func() { close(s.drainC) })
	rec := &statusRecorder{header: http.Header{}}
	s.readyz(rec, nil)
	if rec.code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining = %d, want 503", rec.code)
	}
}

type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.code = code }
