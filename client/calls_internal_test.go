package client

import "testing"

// ack is the lowest seq without a reply, whatever order replies come in;
// unsequenced calls (keepalives) do not count; requeue keeps the first
// order and drops keepalives.
func TestCallTableAck(t *testing.T) {
	var tb callTable
	tb.init()
	if got := tb.ack(); got != 1 {
		t.Fatalf("ack of an empty table = %d, want 1 (the next seq)", got)
	}
	calls := make([]*call, 5)
	for i := range calls {
		calls[i] = newCall(nil)
		tb.add(calls[i], true)
	}
	ka := newCall(nil)
	ka.keepAlive = true
	tb.add(ka, false)
	if ka.seq != 0 || calls[4].seq != 5 {
		t.Fatalf("seqs: keepalive %d, fifth %d; want 0 and 5", ka.seq, calls[4].seq)
	}
	for _, step := range []struct {
		reply uint64 // call id answered
		ack   uint64
	}{
		{2, 1}, {1, 3}, {6, 3}, {5, 3}, {3, 4}, {4, 6},
	} {
		if tb.take(step.reply) == nil {
			t.Fatalf("call %d not pending", step.reply)
		}
		if got := tb.ack(); got != step.ack {
			t.Fatalf("after the reply to call %d: ack %d, want %d", step.reply, got, step.ack)
		}
	}
	if tb.take(3) != nil {
		t.Fatal("a call answered twice")
	}

	tb.reset()
	a, k, b := newCall(nil), newCall(nil), newCall(nil)
	k.keepAlive = true
	tb.add(a, true)
	tb.add(k, false)
	tb.add(b, true)
	if a.seq != 1 || b.seq != 2 {
		t.Fatalf("after reset seqs %d, %d; want 1, 2", a.seq, b.seq)
	}
	dropped := tb.requeue()
	if len(dropped) != 1 || dropped[0] != k || len(tb.queue) != 2 || tb.queue[0] != a || tb.queue[1] != b {
		t.Fatalf("requeue: dropped %v, queue %v", dropped, tb.queue)
	}
	if tb.has(k) || !tb.has(a) {
		t.Fatal("requeue must drop the keepalive and keep the others pending")
	}
}
