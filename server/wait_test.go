package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/internal/apierr"
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
}

// A client whose deadline is shorter than its wait hears BUSY (the wait ran
// out) before the deadline, not deadline_exceeded with the wait still queued.
func TestWaitShorterThanClientDeadline(t *testing.T) {
	_, url := startServer(t)
	for _, c := range protocols(url) {
		t.Run(c.name, func(t *testing.T) {
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
