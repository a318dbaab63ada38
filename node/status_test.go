package node

import (
	"context"
	"testing"
	"time"

	"github.com/fenceworks/fence/state"
)

// Status exports what metrics need: the age of the oldest remembered id,
// the queued acquires, the recorded rules, fsyncs and snapshots.
func TestStatusForMetrics(t *testing.T) {
	n := openRules(t, t.TempDir(), withMaxTTL(3*time.Hour))
	st := n.Status()
	if st.Rules != withMaxTTL(3*time.Hour) || st.OldestIDAge != 0 || st.Queued != 0 || st.Fatal != nil || st.LogSyncs == 0 {
		t.Fatalf("fresh status = %+v", st)
	}
	l := mustApply(t, n, acquire("job", time.Hour)).Lease
	mustApply(t, n, state.Command{Op: state.OpWrite, Name: "r", Token: l.Token, Value: []byte("v"), OpID: "op-1"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := acquire("job", time.Hour)
	w.Wait = time.Hour
	done := applyAsync(n, ctx, w)
	waitUntil(t, "the waiter is queued", func() bool { return n.Status().Queued == 1 })
	// Server time moves on with every command; the id was remembered at
	// the write's.
	mustApply(t, n, acquire("other", time.Minute))
	if st := n.Status(); st.OldestIDAge <= 0 || st.Waiters != 1 {
		t.Fatalf("status = %+v, want a positive OldestIDAge and one waiter here", st)
	}
	cancel()
	recv(t, done)
}
