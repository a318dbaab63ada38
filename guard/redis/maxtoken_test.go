package redisguard

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fenceworks/fence"
)

func TestMaxToken(t *testing.T) {
	g, rdb := newTestGuard(t, Options{})
	if m, err := g.MaxToken(ctx); err != nil || m != 0 {
		t.Fatalf("empty prefix: MaxToken = %d, %v", m, err)
	}
	// More resources than one SCAN page, op records (strings) beside them.
	for i := 1; i <= 1500; i++ {
		tok := fence.Token(i % 700)
		if i == 977 {
			tok = 90001
		}
		if tok == 0 {
			tok = 1
		}
		mustSet(t, g, fmt.Sprintf("r%d", i), tok, "v", fmt.Sprintf("op%d", i))
	}
	mustSet(t, g, "r5", 90000, "v", "") // one resource moves up
	// A resource under another prefix does not count.
	other, err := New(rdb, Options{Prefix: g.Prefix() + "x", AcceptVolatile: true, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePrefix(rdb, g.Prefix()+"x") })
	mustSet(t, other, "r", 1<<40, "v", "")
	m, err := MaxToken(ctx, rdb, g.Prefix())
	if err != nil || m != 90001 {
		t.Fatalf("MaxToken = %d, %v; want 90001", m, err)
	}
	if _, err := MaxToken(ctx, rdb, "bad*prefix"); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("bad prefix: %v", err)
	}
}
