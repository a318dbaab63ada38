package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// TestFailFastOnlyBeforeTheServerWasReached: once an attempt of the call
// reached a server, a later failure to connect is retried as usual (the
// server may be restarting), not reported as unreachable.
func TestFailFastOnlyBeforeTheServerWasReached(t *testing.T) {
	ln := listenLoopback(t)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Close() // the first attempt connects, and its reply is lost
		}
		ln.Close() // later attempts cannot connect
	}()
	c := newClientFor(t, "http://"+ln.Addr().String(), client.WithFailFast(), client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(ctxFor(t), 300*time.Millisecond)
	defer cancel()
	_, err := c.Read(ctx, "x")
	var un *client.UnreachableError
	if errors.As(err, &un) || ctx.Err() == nil {
		t.Fatalf("read: %v (ctx %v), want retries until the context ended", err, ctx.Err())
	}
}
