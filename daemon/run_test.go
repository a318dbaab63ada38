package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/testutil"
)

// Run serves until its context is cancelled and returns nil; a second Run
// on the same data dir while the first runs fails clearly; a restart on the
// same data dir keeps the token counter.
func TestRunShutdownAndRestart(t *testing.T) {
	dir := t.TempDir()
	addr := testutil.FreeAddr(t)
	var logs testutil.Buffer
	cfg := Config{Listen: addr, DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil)), LockTimeout: 100 * time.Millisecond}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	for !strings.Contains(logs.String(), "fence serving on http://"+addr) {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	lc := fencev1connect.NewLockServiceClient(hc, "http://"+addr)
	acquire := func(name string) uint64 {
		t.Helper()
		r, err := lc.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: name, Ttl: durationpb.New(time.Hour)}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg.Lease.Token
	}
	if tok := acquire("a"); tok != 1 {
		t.Fatalf("first token = %d", tok)
	}

	second := cfg
	second.Listen = testutil.FreeAddr(t)
	second.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := Run(context.Background(), second); err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second Run on the same data dir = %v, want a clear lock error", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	hc.CloseIdleConnections()

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	logs = testutil.Buffer{}
	go func() { done <- Run(ctx, cfg) }()
	for !strings.Contains(logs.String(), "fence serving on") {
		select {
		case err := <-done:
			t.Fatalf("restart failed: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if tok := acquire("b"); tok != 2 {
		t.Fatalf("first token after restart = %d, want 2", tok)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A blocking acquire in flight at shutdown ends with Unavailable, and
// shutdown does not wait for its (hour-long) wait.
func TestShutdownEndsWaiters(t *testing.T) {
	s, url := startServer(t)
	lc := protocols(url)[0].locks
	ctx := context.Background()
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "w", Ttl: durationpb.New(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "w", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Hour)}))
		errc <- err
	}()
	until(t, "the acquire waits", func() bool { return s.node.Status().Waiters == 1 })
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := <-errc; connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("waiting acquire at shutdown = %v, want unavailable", err)
	}
}

// Run warns when it listens where other machines can reach it (there is no
// TLS and no auth), and not on loopback.
func TestRunWarnsOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		listen string
		warn   bool
	}{{"127.0.0.1:0", false}, {"0.0.0.0:0", true}} {
		var logs testutil.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Config{Listen: tc.listen, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		}()
		for !strings.Contains(logs.String(), "fence serving on") {
			select {
			case err := <-done:
				t.Fatalf("Run returned early: %v", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "non-loopback address without TLS or authentication"); got != tc.warn {
			t.Fatalf("--listen %s: warning logged = %t, want %t\n%s", tc.listen, got, tc.warn, logs.String())
		}
	}
}
