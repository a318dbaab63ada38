package server

import (
	"context"
	"fmt"
	"runtime"
	rtmetrics "runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// lists sends n unary Lists of page size (Connect, JSON), none read.
func (u *unreadConn) lists(n, size int) {
	u.t.Helper()
	for range n {
		id := u.open(fencev1connect.LockServiceListProcedure, "application/json")
		if err := u.fr.WriteData(id, true, []byte(fmt.Sprintf(`{"pageSize":%d}`, size))); err != nil {
			u.t.Fatal(err)
		}
	}
}

// livePeak samples the live heap (as of each collection) until stop is
// closed, keeping the largest seen in peak.
func livePeak(peak *atomic.Int64, stop <-chan struct{}) {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	for {
		rtmetrics.Read(s)
		if v := int64(s[0].Value.Uint64()); v > peak.Load() {
			peak.Store(v)
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// Many connections that pipeline Lists of 10,000 locks and read none make
// the server build at most its reply budget at once besides what it holds
// (it built each connection's 16 MiB at once: 200 connections, 2–3.4 GB
// of heap while the held bytes stayed at the budget), and an acquire of
// another client is served meanwhile.
func TestUnreadListsOfManyConnectionsAreBounded(t *testing.T) {
	const budget = 16 << 20
	s, url := startServerWith(t, Config{MaxReplyBytes: budget})
	ctx := context.Background()
	const locks = 10000
	for i := range locks {
		if a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("lock-%05d", i), Owner: "owner", TTL: time.Hour}); err != nil || a.Err != nil {
			t.Fatal(err, a.Err)
		}
	}
	h := h2cClient()
	lc := fencev1connect.NewLockServiceClient(h, url)
	r, err := lc.List(ctx, connect.NewRequest(&fencev1.ListRequest{PageSize: MaxPageSize}))
	if err != nil || len(r.Msg.GetLocks()) != locks {
		t.Fatalf("an honest List: %v", err)
	}
	cost := replyCostFactor*int64(proto.Size(r.Msg)) + listCost(r.Msg)
	t.Logf("a List of %d locks costs %d KiB", locks, cost>>10)
	base := heapAllocAfterGC()

	// What is held and what is being made, each at most the budget, and
	// the 400 requests' streams and handlers.
	const slack = 2 * heapSlack
	bound := base + 2*budget + slack
	var peak atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go livePeak(&peak, stop)
	// Two a connection: its first reply (7.7 MiB) fits beside the other's
	// first guess (3 MiB) in its 16 MiB, so it is held at once.
	const conns, lists, page = 200, 2, MaxPageSize
	atks := make([]*unreadConn, 0, conns)
	for range conns {
		atk := dialUnread(t, url, nil)
		atk.lists(lists, page)
		atks = append(atks, atk)
	}
	// Until the budget holds two replies and every other List waits
	// (for room to hold its reply, or to be made: at most one is being
	// made), so that each connection's first Lists were made meanwhile
	// (before the fix all at once), or the heap is already past its
	// bound.
	until(t, "two unread Lists held, the others waiting", func() bool {
		_, holds, waiting := s.replies.state()
		_, _, bw := s.building.state()
		return holds >= 2 && holds+waiting+bw >= conns*lists-1 || peak.Load() > bound
	})
	used, _, _ := s.replies.state()
	// A small call is not kept waiting by the full budgets.
	actx, cancel := context.WithTimeout(ctx, hangGuard)
	_, err = lc.Acquire(actx, connect.NewRequest(&fencev1.AcquireRequest{Name: "honest", Ttl: durationpb.New(time.Minute)}))
	cancel()
	if err != nil {
		t.Fatalf("an honest acquire during the attack: %v", err)
	}
	grew := peak.Load() - base
	t.Logf("live heap peaked %d MiB over its %d MiB before; reply bytes held %d MiB", grew>>20, base>>20, used>>20)
	if peak.Load() > bound {
		t.Fatalf("the live heap grew %d bytes under %d connections' unread Lists, want at most %d (twice the server's budget and %d)", grew, conns, bound-base, slack)
	}
	runtime.KeepAlive(r)
	if used > budget {
		t.Fatalf("the server holds %d reply bytes, over its budget %d", used, budget)
	}

	// Once the attacker goes, every byte is given back (and no handler
	// is left making a reply).
	for _, a := range atks {
		a.c.Close()
	}
	until(t, "the attacker's reply bytes given back", func() bool {
		u, holds, waiting := s.replies.state()
		bu, _, bw := s.building.state()
		return u == 0 && holds == 0 && waiting == 0 && bu == 0 && bw == 0
	})
}

// heapAllocAfterGC is the heap allocated after a collection.
func heapAllocAfterGC() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	runtime.GC()
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}
