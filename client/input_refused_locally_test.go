package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

// TestBadInputRefusedLocally: bad input is refused with *fence.InvalidError
// naming the field before anything is sent: the client here points at an
// address where nothing listens, so a request sent would fail otherwise.
func TestBadInputRefusedLocally(t *testing.T) {
	ln := listenLoopback(t)
	url := "http://" + ln.Addr().String()
	ln.Close()
	c := newClientFor(t, url, client.WithFailFast())
	ctx := ctxFor(t)
	calls := []struct {
		field string
		call  func() error
	}{
		{"name", func() error { return c.Release(ctx, "", 1) }},
		{"token", func() error { return c.Release(ctx, "x", 0) }},
		{"name", func() error { _, err := c.Renew(ctx, "", 1, 0); return err }},
		{"token", func() error { _, err := c.Renew(ctx, "x", 0, 0); return err }},
		{"ttl", func() error { _, err := c.Renew(ctx, "x", 1, time.Nanosecond); return err }},
		{"name", func() error { _, err := c.Get(ctx, ""); return err }},
		{"resource", func() error { _, err := c.Read(ctx, ""); return err }},
		{"resource", func() error { _, err := c.Delete(ctx, "", 1); return err }},
		{"token", func() error { _, err := c.Delete(ctx, "r", 0); return err }},
		{"op_id", func() error { _, err := c.Delete(ctx, "r", 1, client.OpID(strings.Repeat("x", 300))); return err }},
		{"token", func() error { _, err := c.Add(ctx, "r", 0, 1); return err }},
		{"page_size", func() error { _, _, err := c.ListPage(ctx, "", "", -1); return err }},
	}
	for i, tc := range calls {
		err := tc.call()
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("call %d: %v, want *fence.InvalidError naming %s, refused before sending", i, err, tc.field)
		}
	}
}
