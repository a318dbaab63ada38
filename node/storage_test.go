package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// The node's side of its raft storage (package raftstore): the log store
// it opens, fail-stop through the whole node, an fsync before every ack.
// The store-level tests are raftstore's.

func openKind(dir, kind string) (*Node, error) {
	return Open(Config{DataDir: dir, LogStore: kind, LockTimeout: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// A new dir gets the WAL; reopening it without naming a kind finds it again,
// with its tokens (G1).
func TestNewDirUsesWAL(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	mustApply(t, n, acquire("a", time.Hour))
	n.Close()
	if _, err := os.Stat(filepath.Join(dir, "wal")); err != nil {
		t.Fatalf("no wal dir after first open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raft.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new dir got %s (err %v); want only the wal", "raft.db", err)
	}
	n = openNode(t, dir)
	if got := mustApply(t, n, acquire("b", time.Hour)).Lease.Token; got != 2 {
		t.Fatalf("token after reopen = %d, want 2", got)
	}
}

// A dir holding a raft-boltdb log is refused: no node starts a second,
// empty log beside it.
func TestBoltDirRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raft.db"), []byte("bolt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := openKind(dir, ""); err == nil || !strings.Contains(err.Error(), "not migrated") {
		if n != nil {
			n.Close()
		}
		t.Fatalf("open a bolt dir = %v, want a 'not migrated' refusal", err)
	}
}

// The dir lock holds, and is released by Close.
func TestSecondOpenFails(t *testing.T) {
	for _, kind := range []string{LogStoreWAL} {
		dir := t.TempDir()
		n, err := openKind(dir, kind)
		if err != nil {
			t.Fatal(err)
		}
		_, err = openKind(dir, "")
		if !errors.Is(err, ErrDirLocked) || !strings.Contains(err.Error(), "locked by another process") {
			t.Fatalf("%s: second open = %v, want ErrDirLocked", kind, err)
		}
		n.Close()
		n, err = openKind(dir, "")
		if err != nil {
			t.Fatalf("%s: open after Close: %v", kind, err)
		}
		n.Close()
	}
}

// failingLog is a log store with a switch: once on, every StoreLogs writes
// the first half of its batch (a disk that fills mid-write) and fails.
type failingLog struct {
	raft.LogStore
	on atomic.Bool
}

var errDiskFull = errors.New("injected: no space left on device")

func (f *failingLog) StoreLogs(logs []*raft.Log) error {
	if f.on.Load() {
		if half := len(logs) / 2; half > 0 {
			if err := f.LogStore.StoreLogs(logs[:half]); err != nil {
				return err
			}
		}
		return errDiskFull
	}
	return f.LogStore.StoreLogs(logs)
}

func (f *failingLog) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A log write error is fatal (fault 5): OnFatal is called once, nothing is
// acknowledged after it, and a restart on the same dir with a healthy store
// has every acknowledged write, and grants no token twice.
func TestLogWriteErrorIsFatal(t *testing.T) {
	dir := t.TempDir()
	flaky := &failingLog{}
	var fatals atomic.Int32
	var failed atomic.Bool
	fatalErr := make(chan error, 1)
	n, err := Open(Config{DataDir: dir, Logger: quietLogger(),
		wrapLog: func(s raft.LogStore) raft.LogStore { flaky.LogStore = s; return flaky },
		OnFatal: func(err error) {
			failed.Store(true)
			if fatals.Add(1) == 1 {
				fatalErr <- err
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	const workers = 8
	type ack struct {
		seq   int // last acknowledged write of the worker's resource
		token fence.Token
	}
	var (
		mu        sync.Mutex
		acked     [workers]ack
		maxToken  fence.Token // the largest token any reply carried
		acks      atomic.Int64
		lateAcks  atomic.Int64 // successes of calls started after the failure
		unknowns  atomic.Int64
		wg        sync.WaitGroup
		flipAfter = int64(300)
	)
	call := func(cmd state.Command) (state.Result, error) {
		late := failed.Load()
		res, err := n.Apply(context.Background(), cmd)
		if err == nil && late {
			lateAcks.Add(1)
		}
		if errors.Is(err, ErrUnknownOutcome) {
			unknowns.Add(1)
		}
		if err == nil {
			if acks.Add(1) == flipAfter {
				flaky.on.Store(true)
			}
		}
		return res, err
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock, res := "lock-"+strconv.Itoa(w), "res-"+strconv.Itoa(w)
			errs := 0
			for seq := 1; errs < 3; seq++ {
				r, err := call(state.Command{Op: state.OpAcquire, Name: lock, Owner: "w", TTL: time.Hour})
				if err != nil {
					errs++
					continue
				}
				if r.Err != nil {
					t.Errorf("acquire %s refused: %v", lock, r.Err)
					return
				}
				tok := r.Lease.Token
				mu.Lock()
				maxToken = max(maxToken, tok)
				mu.Unlock()
				r, err = call(state.Command{Op: state.OpWrite, Name: res, Token: tok, Value: []byte(strconv.Itoa(seq)), OpID: fmt.Sprintf("w%d-%d", w, seq)})
				if err == nil && r.Err == nil {
					mu.Lock()
					acked[w] = ack{seq, tok}
					mu.Unlock()
				} else if err == nil {
					t.Errorf("write %s refused: %v", res, r.Err)
					return
				} else {
					errs++
				}
				if _, err := call(state.Command{Op: state.OpRelease, Name: lock, Token: tok}); err != nil {
					errs++
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-fatalErr:
		if !errors.Is(err, errDiskFull) {
			t.Errorf("OnFatal(%v), want the store's error", err)
		}
	default:
		t.Fatalf("the log store failed after %d acks but OnFatal was not called", flipAfter)
	}
	if got := fatals.Load(); got != 1 {
		t.Errorf("OnFatal called %d times, want once", got)
	}
	if got := lateAcks.Load(); got != 0 {
		t.Errorf("%d calls started after the fatal error were acknowledged", got)
	}
	if _, err := n.Apply(context.Background(), acquire("after", time.Hour)); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after the fatal error = %v, want ErrClosed", err)
	}
	if _, err := n.Lock(context.Background(), "after"); err == nil {
		t.Error("a read after the fatal error was answered")
	}
	if n.Status().Ready() {
		t.Error("Status().Ready() after the fatal error")
	}
	t.Logf("%d acks, %d unknown outcomes, fatal after %d", acks.Load(), unknowns.Load(), flipAfter)
	if err := n.Close(); err != nil {
		t.Logf("Close after fatal: %v", err)
	}

	n = openNode(t, dir)
	for w := 0; w < workers; w++ {
		rs, err := n.Resource(context.Background(), "res-"+strconv.Itoa(w))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := strconv.Atoi(string(rs.Value))
		if a := acked[w]; got < a.seq || rs.LastToken < a.token {
			t.Errorf("res-%d after restart = %q token %d; acknowledged write %d with token %d is lost", w, rs.Value, rs.LastToken, a.seq, a.token)
		}
	}
	if last := n.LastToken(); last < maxToken {
		t.Errorf("LastToken after restart = %d, below token %d a client was given", last, maxToken)
	}
	next := mustApply(t, n, acquire("next", time.Hour)).Lease.Token
	if next <= maxToken {
		t.Errorf("first grant after restart = %d, not above every token given before (%d)", next, maxToken)
	}
}

// Each acknowledged command was fsync'd before its reply (G6): the WAL's
// fsync count grows across every Apply. (Kills "no fsync" mutants.)
func TestEveryAckFollowsAnFsync(t *testing.T) {
	n := openNode(t, t.TempDir())
	if n.store.Kind != LogStoreWAL {
		t.Fatalf("log store %q, want the WAL", n.store.Kind)
	}
	tok := mustApply(t, n, acquire("l", time.Hour)).Lease.Token
	for i := 0; i < 50; i++ {
		before := n.store.Syncs()
		res := mustApply(t, n, state.Command{Op: state.OpAdd, Name: "counter", Token: tok, Delta: 1})
		if after := n.store.Syncs(); after <= before {
			t.Fatalf("apply %d acknowledged (%+v) with no fsync of the log (syncs %d -> %d)", i, res, before, after)
		}
	}
}

// OnBatch may be set while batches are applied (-race caught the plain field
// written after a restart with live leases while the FSM read it).
func TestOnBatchSetWhileApplying(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	mustApply(t, n, acquire("live", time.Hour))
	n.Close()
	n = openNode(t, dir)
	var calls atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			n.OnBatch(func(int) { calls.Add(1) })
		}
	}()
	for i := 0; i < 50; i++ {
		mustApply(t, n, state.Command{Op: state.OpAdd, Name: "c", Token: 1, Delta: 1})
	}
	close(stop)
	<-done
	if calls.Load() == 0 {
		t.Fatal("OnBatch hook never called")
	}
}
