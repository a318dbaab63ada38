package daemon

import (
	"context"
	"errors"
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

// Run refuses to listen where other machines can reach a port that speaks
// no TLS — the client port (--listen) or the raft port (--raft-addr) — with
// an *InsecureListenError naming the port, its flag, the address and
// --insecure-listen; with InsecureListen it serves and logs the exposure
// as an error. Loopback needs nothing; a raft port with peer TLS is not
// refused.
func TestRunRefusesOffLoopbackWithoutTLS(t *testing.T) {
	run := func(cfg Config) (logs *testutil.Buffer, err error) {
		t.Helper()
		logs = new(testutil.Buffer)
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		if cfg.DataDir == "" {
			cfg.DataDir = t.TempDir()
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg) }()
		for !strings.Contains(logs.String(), "fence serving on") {
			select {
			case err := <-done:
				return logs, err
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancel()
		return logs, <-done
	}
	refused := func(err error, port, flag, addr string) {
		t.Helper()
		var e *InsecureListenError
		if !errors.As(err, &e) || !errors.Is(err, ErrInsecureListen) || e.Port != port || e.Flag != flag || !strings.HasPrefix(e.Addr, addr) {
			t.Fatalf("Run = %v, want an *InsecureListenError for the %s port (%s) at %s", err, port, flag, addr)
		}
		for _, want := range []string{flag, "--insecure-listen", e.Addr} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not name %s", err.Error(), want)
			}
		}
	}
	const loud = "--insecure-listen: "

	// The client port.
	logs, err := run(Config{Listen: "127.0.0.1:0"})
	if err != nil || strings.Contains(logs.String(), loud) {
		t.Fatalf("--listen 127.0.0.1:0: Run = %v, logs:\n%s", err, logs.String())
	}
	_, err = run(Config{Listen: "0.0.0.0:0"})
	refused(err, "client", "--listen", "0.0.0.0:")
	logs, err = run(Config{Listen: "0.0.0.0:0", InsecureListen: true})
	if err != nil || !strings.Contains(logs.String(), "level=ERROR msg=\""+loud) {
		t.Fatalf("--listen 0.0.0.0:0 --insecure-listen: Run = %v, want it served with an error logged:\n%s", err, logs.String())
	}

	// The raft port (every interface, advertised on loopback).
	raftCfg := func() Config {
		port := testutil.FreeAddr(t)[len("127.0.0.1:"):]
		return Config{Listen: "127.0.0.1:0", NodeID: "n1", Cluster: ClusterConfig{RaftAddr: "0.0.0.0:" + port, RaftAdvertise: "127.0.0.1:" + port, Bootstrap: true}}
	}
	_, err = run(raftCfg())
	refused(err, "raft", "--raft-addr", "0.0.0.0:")
	cfg := raftCfg()
	cfg.InsecureListen = true
	logs, err = run(cfg)
	if err != nil || !strings.Contains(logs.String(), "level=ERROR msg=\""+loud+"the raft port") {
		t.Fatalf("--raft-addr 0.0.0.0 --insecure-listen: Run = %v, want it served with an error logged:\n%s", err, logs.String())
	}
	p := newPeerPKI(t)
	cfg = raftCfg()
	cfg.PeerCertFile, cfg.PeerKeyFile = p.write(t, p.ca, "n1", "n1")
	cfg.PeerTrustedCAFile = p.caFile
	logs, err = run(cfg)
	if err != nil || strings.Contains(logs.String(), loud) {
		t.Fatalf("--raft-addr 0.0.0.0 with peer TLS: Run = %v, want it served without a word:\n%s", err, logs.String())
	}
}
