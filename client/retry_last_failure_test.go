package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fenceworks/fence/client"
)

// A call whose context ends during a retry says why it was retrying: the
// cut attempt's error carries the failure before it (here a node's
// "no leader" answer), not only "context canceled".
func TestCallCutMidRetrySaysTheLastFailure(t *testing.T) {
	var n atomic.Int32
	second := make(chan struct{})
	url := serveLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"code":"unavailable","message":"no leader known to this node"}`))
			return
		}
		close(second)
		<-r.Context().Done() // the second attempt is held until the call gives up
	}))
	c := newClientFor(t, url, client.WithoutSession())
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() { _, err := c.Get(ctx, uniq(t)); done <- err }()
	<-second
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "no leader known to this node") {
		t.Fatalf("Get cut mid-retry: %v; want context.Canceled naming the node's answer before it", err)
	}
}
