//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/harness"
)

// Fault 5 in a cluster: one follower's data dir is on a small filesystem
// that fills while the leader takes writes (the follower stores every
// entry too). The follower must stop (exit non-zero: fail-stop) while the
// other two go on acknowledging; after its filesystem is enlarged and it
// is restarted it catches up, and once it leads it holds every
// acknowledged write and grants no token twice.
func TestClusterFollowerDiskFull(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	dir := t.TempDir()
	small := filepath.Join(dir, harness.NodeID(2))
	// The WAL preallocates 64 MiB segments: in 80 MiB the first fits and
	// its successor does not (as in TestNodeDiskFull).
	mountTmpfs(t, small, "80m")
	// The writes that fill the disk take a time the machine's speed
	// decides (28 s idle, minutes under load): the test's hang guard is
	// on progress — no write acknowledged for hangGuard — not on the
	// whole. Each wait of its own (a leader, a transfer) has one too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	within := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 4*hangGuard) }
	wctx, wcancel := within()
	defer wcancel()
	c, err := harness.StartCluster(wctx, harness.ClusterConfig{N: 3, Dir: dir,
		Args:         []string{"--ready-timeout", "60s"},
		ReadyTimeout: hangGuard, StopTimeout: hangGuard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := c.Node(2)
	if f.DataDir() != small {
		t.Fatalf("%s's data dir is %s, not the small filesystem %s (started again after a port clash?)", f.ID(), f.DataDir(), small)
	}
	lead, err := c.WaitLeader(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if lead == f {
		if lead, err = c.Transfer(wctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{Timeout: hangGuard}
	// The clients ask the leader, and the other node that keeps running
	// when the leader does not answer: on a loaded machine the two may
	// hold an election while the follower fills its disk (a missed
	// heartbeat), and a call meanwhile is refused as unavailable ("knows
	// no leader") or its outcome is unknown. Each is asked again with the
	// same request_id or op_id (failover), as a client does; a refusal
	// (BUSY, STALE_TOKEN, ...) is not, and fails the test.
	urls := []string{lead.URL()}
	for _, n := range c.Nodes() {
		if n != lead && n != f {
			urls = append(urls, n.URL())
		}
	}
	a := newFailover(urls)

	const clients, valueSize = 4, 256 << 10
	type clientState struct {
		ackedSeq   int    // last acknowledged write
		ackedToken uint64 // its token
		maxToken   uint64 // the largest token it was given
		err        error  // what stopped it, if not the test
	}
	var (
		mu        sync.Mutex
		states    = make([]clientState, clients)
		acks      int
		acksAfter int // acknowledged after the follower exited
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock, res := fmt.Sprintf("diskc/lock-%d", i), fmt.Sprintf("diskc/res-%d", i)
			for seq := 1; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				l, err := a.acquire(ctx, lock, "diskc", time.Hour, 0)
				if err == nil {
					mu.Lock()
					states[i].maxToken = max(states[i].maxToken, l.GetToken())
					mu.Unlock()
					_, err = a.write(ctx, res, l.GetToken(), diskValue(seq, valueSize))
				}
				if err != nil {
					mu.Lock()
					states[i].err = err
					mu.Unlock()
					return
				}
				mu.Lock()
				states[i].ackedSeq, states[i].ackedToken = seq, l.GetToken()
				acks++
				select {
				case <-f.Done():
					acksAfter++
				default:
				}
				mu.Unlock()
				if err := a.release(ctx, lock, l.GetToken()); err != nil {
					mu.Lock()
					states[i].err = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	// The follower exits on its own (fail-stop); the others go on: 40 more
	// writes acknowledged after it.
	// 400 writes of 256 KiB are 100 MiB, more than the follower's 80 MiB
	// filesystem holds.
	// stalled fails the test when no write was acknowledged for hangGuard
	// (n: the acknowledged writes now), after stopping the clients.
	lastAcks, lastProgress := 0, time.Now()
	stalled := func(n int, what string) {
		t.Helper()
		if n != lastAcks {
			lastAcks, lastProgress = n, time.Now()
			return
		}
		if time.Since(lastProgress) > hangGuard {
			cancel() // the clients' calls end
			wg.Wait()
			t.Fatalf("no write acknowledged for %s (%d in all) while waiting for %s; %s's log tail:\n%s", hangGuard, n, what, f.ID(), f.LogTail(30))
		}
	}
	for done := false; !done; {
		select {
		case <-f.Done():
			done = true
		case <-time.After(20 * time.Millisecond):
			mu.Lock()
			n := acks
			mu.Unlock()
			stalled(n, f.ID()+" to stop")
			if n > 400 {
				close(stop)
				wg.Wait()
				t.Fatalf("%s still runs after %d writes of %d KiB on its 80 MiB filesystem; log tail:\n%s", f.ID(), n, valueSize>>10, f.LogTail(30))
			}
		}
	}
	for {
		mu.Lock()
		n, failed, all := acksAfter, 0, acks
		for _, st := range states {
			if st.err != nil {
				failed++
			}
		}
		mu.Unlock()
		if n >= 40 || failed == clients {
			break
		}
		stalled(all, "40 writes after "+f.ID()+" stopped")
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for i, st := range states {
		if st.err != nil {
			t.Errorf("client %d: the cluster refused a call after %s's disk filled: %v", i, f.ID(), st.err)
		}
	}
	if f.ExitState().Success() {
		t.Fatalf("%s exited with %v after its disk filled, want a non-zero status", f.ID(), f.ExitState())
	}
	if !strings.Contains(f.Log(), "fatal storage error") {
		t.Errorf("%s's log does not name the fatal storage error", f.ID())
	}
	t.Logf("%d writes acknowledged, %d after %s stopped (%v)", acks, acksAfter, f.ID(), f.ExitState())
	if acksAfter < 40 {
		t.Fatalf("only %d writes acknowledged after %s stopped, want 40: the others did not go on", acksAfter, f.ID())
	}

	// Room again: the follower restarts from its data dir, catches up, and
	// takes the lead; its state (reads are the leader's) holds every
	// acknowledged write, and its grants are above every token given.
	resizeTmpfs(t, small, "400m")
	rctx, rcancel := within()
	defer rcancel()
	if err := f.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	// Raft hands leadership only to a voter that caught up within an
	// election timeout; f has a WAL segment's worth to fetch (and the
	// leader's replication to it backed off while it was down). Wait for
	// the event — f has applied the leader's commit index — then ask; a
	// transfer refused meanwhile (new writes: none here) is asked again
	// (polling: the interval changes nothing but how soon it is asked).
	restarted := time.Now()
	waitConverged(t, c)
	tctx, tcancel := within()
	defer tcancel()
	for {
		_, err := c.Transfer(tctx, f)
		if err == nil {
			break
		}
		if tctx.Err() != nil {
			t.Fatalf("transfer to %s: %v", f.ID(), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%s leads %s after its restart", f.ID(), time.Since(restarted).Round(time.Millisecond))
	fa := api{Locks: fencev1connect.NewLockServiceClient(hc, f.URL()),
		Resources: fencev1connect.NewResourceServiceClient(hc, f.URL())}
	var maxToken uint64
	for i, st := range states {
		maxToken = max(maxToken, st.maxToken)
		rs, err := fa.read(ctx, fmt.Sprintf("diskc/res-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got := diskSeq(rs.GetValue()); got < st.ackedSeq || rs.GetLastToken() < st.ackedToken {
			t.Errorf("diskc/res-%d on %s: write %d (token %d); acknowledged write %d (token %d) is lost",
				i, f.ID(), got, rs.GetLastToken(), st.ackedSeq, st.ackedToken)
		}
	}
	for range 20 {
		l, err := fa.acquire(ctx, "diskc/after", "after", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if l.GetToken() <= maxToken {
			t.Fatalf("grant on %s has token %d, not above %d given before", f.ID(), l.GetToken(), maxToken)
		}
		maxToken = l.GetToken()
		if err := fa.release(ctx, "diskc/after", l.GetToken()); err != nil {
			t.Fatal(err)
		}
	}
}
