package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// A waiting handler is bounded by its wait plus a margin even when the
// client sent no deadline; a client deadline shorter than the wait shortens
// the wait so the answer arrives before the deadline.
func TestBoundWait(t *testing.T) {
	before := time.Now()
	ctx, wait, cancel := boundWait(context.Background(), time.Hour)
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok || wait != time.Hour || dl.Before(before.Add(time.Hour+handlerMargin)) || dl.After(time.Now().Add(time.Hour+handlerMargin)) {
		t.Fatalf("no client deadline: wait %s, deadline %v (ok %t); want the wait and a deadline of wait+%s", wait, dl, ok, handlerMargin)
	}

	client, cancelClient := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelClient()
	_, wait, cancel2 := boundWait(client, time.Hour)
	defer cancel2()
	if wait > 10*time.Second-replyMargin || wait < 8*time.Second {
		t.Fatalf("10s client deadline, 1h wait: wait %s, want about %s", wait, 10*time.Second-replyMargin)
	}

	_, wait, cancel3 := boundWait(client, time.Second)
	defer cancel3()
	if wait != time.Second {
		t.Fatalf("a wait that fits the client deadline was changed to %s", wait)
	}

	// A client deadline that leaves no more than the reply margin makes a
	// try, in a context the client's deadline does not end.
	for _, budget := range []time.Duration{replyMargin, 100 * time.Millisecond, -time.Second} {
		tight, cancelTight := context.WithTimeout(context.Background(), budget)
		before := time.Now()
		ctx, wait, cancel := boundWait(tight, time.Hour)
		dl, ok := ctx.Deadline()
		if wait != 0 || !ok || dl.Before(before.Add(handlerMargin)) {
			t.Errorf("%s client budget, 1h wait: wait %s, deadline in %s (ok %t); want a try (0) with a deadline %s away", budget, wait, time.Until(dl), ok, handlerMargin)
		}
		cancelTight()
		if ctx.Err() != nil {
			t.Errorf("%s client budget: the try's context ended with the client's: %v", budget, ctx.Err())
		}
		cancel()
	}
}

// TestTinyClientDeadlineIsATry: with a client deadline shorter than the
// reply margin (Connect-Timeout-Ms: 1, grpc-timeout: 1m) a waiting acquire
// is answered by the machine as a try, BUSY on a held lock and the grant on
// a free one, never deadline_exceeded before the server answered (it was:
// the wait was shortened to 1ms and the client's deadline cut the commit).
func TestTinyClientDeadlineIsATry(t *testing.T) {
	_, url := startServer(t)
	hold := postJSON(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"tiny-held","owner":"A","ttl":"3600s"}`), nil)
	if hold.status != http.StatusOK {
		t.Fatalf("acquire: %d %s", hold.status, hold.body)
	}
	tiny := map[string]string{"Connect-Timeout-Ms": "1"}
	r := postJSON(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"tiny-held","owner":"B","ttl":"5s","wait":"20s"}`), tiny)
	if r.status != http.StatusTooManyRequests || r.detail == nil || r.detail.Reason != "BUSY" || r.detail.Holder != "A" || r.detail.Waited {
		t.Fatalf("1ms deadline, 20s wait on a held lock: %d %s; want BUSY held by A, not waited", r.status, r.body)
	}
	r = postJSON(t, url, "/fence.v1.LockService/Acquire", []byte(`{"name":"tiny-free","owner":"B","ttl":"5s","wait":"20s"}`), tiny)
	if r.status != http.StatusOK || !strings.Contains(r.body, `"owner":"B"`) {
		t.Fatalf("1ms deadline, 20s wait on a free lock: %d %s; want the grant", r.status, r.body)
	}

	grpc := protocols(url)[1]
	req := connect.NewRequest(&fencev1.AcquireRequest{Name: "tiny-held", Owner: "C", Ttl: durationpb.New(5 * time.Second), Wait: durationpb.New(20 * time.Second)})
	req.Header().Set("Grpc-Timeout", "1m")
	_, err := grpc.locks.Acquire(context.Background(), req)
	var busy *fence.BusyError
	if !errors.As(apierr.FromConnect(err), &busy) || busy.Holder != "A" || busy.Waited {
		t.Fatalf("gRPC, 1ms deadline, 20s wait on a held lock: %v; want BUSY held by A, not waited", err)
	}
}

// A client whose deadline is shorter than its wait hears BUSY (the wait ran
// out) before the deadline, not deadline_exceeded with the wait still queued.
func TestWaitShorterThanClientDeadline(t *testing.T) {
	_, url := startServer(t)
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each waits out most of its 4s deadline, on a lock of its own
			name := "held-" + c.name
			if _, err := c.locks.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "A", Ttl: durationpb.New(time.Hour)})); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			defer cancel()
			_, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "B", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Hour)}))
			var busy *fence.BusyError
			if !errors.As(apierr.FromConnect(err), &busy) || !busy.Waited || busy.Holder != "A" {
				t.Fatalf("acquire with a 4s deadline and a 1h wait = %v, want BUSY (the wait ran out) before the deadline", err)
			}
		})
	}
}

// takeTry marks a request a try, and takes its deadline header off, only
// when the deadline is positive and leaves no more than replyMargin.
func TestTakeTry(t *testing.T) {
	for _, tc := range []struct {
		ct, key, value string
		try            bool
	}{
		{"application/json", "Connect-Timeout-Ms", "1", true},
		{"application/json", "Connect-Timeout-Ms", "1000", true},
		{"application/json", "Connect-Timeout-Ms", "1001", false},
		{"application/json", "Connect-Timeout-Ms", "0", false},
		{"application/json", "Connect-Timeout-Ms", "soon", false},
		{"application/grpc", "Grpc-Timeout", "1m", true},
		{"application/grpc", "Grpc-Timeout", "999999u", true},
		{"application/grpc", "Grpc-Timeout", "1S", true},
		{"application/grpc", "Grpc-Timeout", "2S", false},
		{"application/grpc", "Grpc-Timeout", "99999999H", false},
		{"application/grpc", "Grpc-Timeout", "0n", false},
		{"application/grpc+proto", "Connect-Timeout-Ms", "1", false},
	} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Content-Type", tc.ct)
		r.Header.Set(tc.key, tc.value)
		got := takeTry(r)
		if try := got.Context().Value(tryKey{}) != nil; try != tc.try || (got.Header.Get(tc.key) == "") != tc.try {
			t.Errorf("%s %s: %s: try %t, header left %q; want try %t", tc.ct, tc.key, tc.value, try, got.Header.Get(tc.key), tc.try)
		}
	}
}
