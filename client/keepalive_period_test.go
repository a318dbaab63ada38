package client_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/fenceworks/fence/client"
)

// TestKeepAliveOption: KeepAlive(d) sets the renewal period: with a TTL of
// a minute (default period 20s), 10ms renewals arrive at once.
func TestKeepAliveOption(t *testing.T) {
	ctx, name := ctxFor(t), uniq(t)
	rec := &recorder{}
	c := newClientFor(t, serverURL, client.WithHTTPClient(&http.Client{Transport: rec}))
	l, err := c.Acquire(ctx, name, client.TTL(time.Minute), client.KeepAlive(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	guard := time.After(15 * time.Second) // a hang guard far below the default period (20s)
	for {
		n := 0
		for _, m := range rec.list() {
			if m == "Renew" {
				n++
			}
		}
		if n >= 3 {
			return
		}
		select {
		case <-guard:
			t.Fatalf("%d renewals in 15s with KeepAlive(10ms)", n)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
