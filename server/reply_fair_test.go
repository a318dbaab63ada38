package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// listsOf sends n unary Lists of prefix, page size (Connect, JSON), none
// read.
func (u *unreadConn) listsOf(n, size int, prefix string) {
	u.t.Helper()
	for range n {
		id := u.open(fencev1connect.LockServiceListProcedure, "application/json")
		if err := u.fr.WriteData(id, true, []byte(fmt.Sprintf(`{"prefix":%q,"pageSize":%d}`, prefix, size))); err != nil {
			u.t.Fatal(err)
		}
	}
}

// answerPings reads the connection's frames from now on (no more
// requests may be sent on it) and answers the server's PINGs, as an
// attacker's client does, so that the server keeps the connection while
// its replies stay unread (its window stays shut: nothing else is sent).
func (u *unreadConn) answerPings() {
	go func() {
		for {
			f, err := u.fr.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				if u.fr.WritePing(true, p.Data) != nil {
					return
				}
			}
		}
	}()
}

// One principal's unread replies, on as many connections as it likes,
// hold at most its share of the server's reply budget: another
// principal's large List is answered while they wait (an outside attack:
// one tenant's unread Lists on many connections made every other
// tenant's large reads wait until --write-timeout cut them).
func TestOnePrincipalsUnreadListsLeaveRoomForAnother(t *testing.T) {
	const budget = 64 << 20
	// Longer than the hang guard: only the share may let B through, not
	// A's replies being cut (A answers the server's PINGs, too).
	f := newAuthFixtureWith(t, Config{MaxReplyBytes: budget, WriteTimeout: 10 * time.Minute, ReadTimeout: 10 * time.Minute})
	s := f.s
	ctx := context.Background()
	const locks = 10000
	for i := range locks {
		if a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: fmt.Sprintf("jobs/lock-%05d", i), Owner: "owner", TTL: time.Hour}); err != nil || a.Err != nil {
			t.Fatal(err, a.Err)
		}
	}
	lc := fencev1connect.NewLockServiceClient(h2cClient(), f.url)
	list := func(ctx context.Context, who string) (*connect.Response[fencev1.ListResponse], error) {
		req := connect.NewRequest(&fencev1.ListRequest{Prefix: "jobs/", PageSize: MaxPageSize})
		req.Header().Set("Authorization", f.creds[who])
		return lc.List(ctx, req)
	}
	r, err := list(ctx, "admin")
	if err != nil || len(r.Msg.GetLocks()) != locks {
		t.Fatalf("an honest List: %v", err)
	}
	cost := replyCostFactor*int64(proto.Size(r.Msg)) + listCost(r.Msg)
	share := principalShare(budget)
	t.Logf("a List of %d locks costs %d KiB; a principal's share %d MiB of %d", locks, cost>>10, share>>20, budget>>20)

	// Principal A ("read"): 8 connections of 2 unread Lists each, twice
	// the server's budget, until A holds its share (its other Lists
	// wait).
	const conns, lists = 8, 2
	atks := make([]*unreadConn, 0, conns)
	for range conns {
		atk := dialUnread(t, f.url, nil)
		atk.auth = f.creds["read"]
		atk.listsOf(lists, MaxPageSize, "jobs/")
		atk.answerPings()
		atks = append(atks, atk)
	}
	until(t, "A's unread Lists fill its share", func() bool {
		used, _, _ := s.replies.state()
		return used > share-cost
	})
	used, holds, waiting := s.replies.state()
	t.Logf("A holds %d MiB in %d replies, %d waiting", used>>20, holds, waiting)

	// Principal B ("readwrite") is answered while A's Lists stay unread.
	bctx, cancel := context.WithTimeout(ctx, 2*hangGuard)
	defer cancel()
	rb, err := list(bctx, "readwrite")
	if err != nil || len(rb.Msg.GetLocks()) != locks {
		t.Fatalf("B's List while A's unread Lists fill the server: %v (A holds %d of %d bytes)", err, used, budget)
	}
	if used, _, _ := s.replies.state(); used > budget {
		t.Fatalf("the server holds %d reply bytes, over its budget %d", used, budget)
	}

	// Once A goes, every byte is given back and no principal's budget is
	// left behind.
	for _, a := range atks {
		a.c.Close()
	}
	until(t, "A's reply bytes given back, its budget removed", func() bool {
		u, holds, waiting := s.replies.state()
		bu, _, bw := s.building.state()
		return u == 0 && holds == 0 && waiting == 0 && bu == 0 && bw == 0 && s.principalReplies.len() == 0
	})
}

// A Read reserves, while it is made, what its value's reply costs, not
// the largest value's: a small Read never waits for the large replies
// being made, a large one does (an outside attack: with --max-reply-bytes
// 32 MiB a Read of 4 bytes took 3.7–4.7 s, each Read reserving 3 MiB).
func TestASmallReadDoesNotWaitForRepliesBeingMade(t *testing.T) {
	s, url := startServerWith(t, Config{})
	ctx := context.Background()
	a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: "small", TTL: time.Hour})
	if err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	if w, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpWrite, Name: "small", Token: a.Lease.Token, Value: []byte("tiny")}); err != nil || w.Err != nil {
		t.Fatal(err, w.Err)
	}
	writeBig(t, s, "big")
	// Other replies being made hold the whole build budget.
	if err := s.building.take(ctx, s.building.max); err != nil {
		t.Fatal(err)
	}
	given := false
	giveBack := func() {
		if !given {
			given = true
			s.building.give(s.building.max)
		}
	}
	defer giveBack()
	rc := fencev1connect.NewResourceServiceClient(h2cClient(), url)
	sctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	r, err := rc.Read(sctx, connect.NewRequest(&fencev1.ReadRequest{Resource: "small"}))
	if err != nil || string(r.Msg.GetState().GetValue()) != "tiny" {
		t.Fatalf("a small Read while the build budget is full: %v", err)
	}
	// A large Read waits for room to be made, and is answered once the
	// other builds end.
	done := make(chan error, 1)
	go func() {
		r, err := rc.Read(sctx, connect.NewRequest(&fencev1.ReadRequest{Resource: "big"}))
		if err == nil && len(r.Msg.GetState().GetValue()) != fence.MaxValueBytes {
			err = fmt.Errorf("read %d bytes, want %d", len(r.Msg.GetState().GetValue()), fence.MaxValueBytes)
		}
		done <- err
	}()
	until(t, "the large Read waits for room to be made", func() bool {
		_, _, waiting := s.building.state()
		return waiting == 1
	})
	giveBack()
	if err := <-done; err != nil {
		t.Fatalf("the large Read once the builds ended: %v", err)
	}
}
