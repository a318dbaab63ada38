package client_test

import (
	"errors"
	"testing"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestServiceSilentConnectionFailsUnavailable: a Service whose connection
// goes silent (the network holds every byte, the server looks paused) does
// not hold its calls until their contexts end: its own transport pings the
// connection, closes it when the ping gets no answer, and the call fails
// with fence.ErrUnavailable while its context is still live (the caller,
// a node forwarding to its leader, retries). The context's 30s is only a
// ceiling: the transport gives up after about 4s.
//
// Kills the arithmetic mutant of service.go's SendPingTimeout
// (2 / time.Second = 0: no pings), under which the call hangs until its
// context ends.
func TestServiceSilentConnectionFailsUnavailable(t *testing.T) {
	t.Parallel() // waits out a held reply or a silent network on a proxy of its own
	ctx := ctxFor(t)
	proxy, url := newTCPProxy(t, serverURL)
	svc := client.NewService(url)
	if _, err := svc.Get(ctx, uniq(t)); err != nil {
		t.Fatal(err) // the connection is up
	}
	proxy.setPaused(true)
	_, err := svc.Get(ctx, uniq(t))
	if ctx.Err() != nil {
		t.Fatalf("the call on a silent connection ran until its context ended (%v): the transport must detect the dead connection", err)
	}
	if !errors.Is(err, fence.ErrUnavailable) {
		t.Fatalf("call on a silent connection = %v, want fence.ErrUnavailable", err)
	}
}
