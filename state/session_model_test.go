package state

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fenceworks/fence"
	"pgregory.net/rapid"
)

// sessClient is the test's view of one session's client: the seqs it sent
// and what it acknowledged.
type sessClient struct {
	id      uint64
	ttl     time.Duration
	until   int64 // the session lives at least until then (decision time): last keepalive + TTL
	closed  bool  // closed by a command the test saw succeed
	nextSeq uint64
	ack     uint64
	sent    map[uint64]Command // by seq
	first   map[uint64]Result  // first answer, by seq
}

// TestSessionsProperty runs random sessions (open, keepalive, close,
// session-bound acquires with and without waits, sequenced adds, retries of
// any seq with any ack so far, standalone acquires, renews, releases,
// cancels of waits (session ones included), ticks, random Slack) and checks after every step:
//   - exactly-once: an add under a seq is applied at most once (the
//     counter equals the adds applied fresh), a retry answers as the first;
//   - G3 for sessions: a session is never ended (SESSION_EXPIRED) before
//     its last keepalive + TTL as of the decision time, and a lock held by a
//     session-bound lease is not granted to anyone else before that;
//   - memory bounded by acknowledgement: a session's saved results are
//     within [floor, largest seq sent] (so at most that many), and at most
//     MaxSessionResults;
//   - the internal links (session leases and waiters vs locks, the waiting
//     count, no live session past its expiry) hold;
//   - a twin restored from a snapshot at a random step answers every later
//     command identically, and replaying the whole log on a fresh machine
//     gives the same results and snapshot bytes.
func TestSessionsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.MaxSessionResults = 6
		m := NewWithConfig(cfg)
		var twin *Machine
		var log []Command
		var results []string
		var clients []*sessClient
		var now int64
		applied := 0 // adds applied fresh
		type holder struct {
			sess  uint64
			until int64 // standalone: its end
			tok   fence.Token
		}
		holders := map[string]holder{}
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for step := range steps {
			now += int64(rapid.SampledFrom([]time.Duration{0, 100 * time.Millisecond, time.Second, 2 * time.Second}).Draw(t, "dt"))
			slack := rapid.SampledFrom([]time.Duration{0, 0, 500 * time.Millisecond}).Draw(t, "slack")
			var c Command
			var cl *sessClient
			pick := func() *sessClient {
				if len(clients) == 0 {
					return nil
				}
				return clients[rapid.IntRange(0, len(clients)-1).Draw(t, "client")]
			}
			switch op := rapid.IntRange(0, 12).Draw(t, "op"); {
			case op == 0 || len(clients) == 0:
				c = Command{Op: OpSessionOpen, TTL: rapid.SampledFrom([]time.Duration{2 * time.Second, 5 * time.Second}).Draw(t, "ttl"),
					RequestID: rapid.SampledFrom([]string{"", "", "o1"}).Draw(t, "open_id")}
			case op == 1:
				c = Command{Op: OpTick}
			case op == 2:
				c = Command{Op: OpAcquire, Name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"), Owner: "X", TTL: 3 * time.Second,
					Wait: rapid.SampledFrom([]time.Duration{0, 2 * time.Second}).Draw(t, "wait"), RequestID: rapid.SampledFrom([]string{"x1", "x2"}).Draw(t, "rid")}
			case op == 3:
				c = Command{Op: rapid.SampledFrom([]Op{OpRelease, OpRenew}).Draw(t, "relop"), Name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"),
					Token: fence.Token(rapid.IntRange(1, int(max(m.LastToken(), 1))).Draw(t, "token"))}
			case op == 4:
				cl = pick()
				c = Command{Op: OpSessionClose, Session: cl.id}
			case op == 5:
				cl = pick()
				c = Command{Op: OpSessionKeepAlive, Session: cl.id, TTL: rapid.SampledFrom([]time.Duration{0, 3 * time.Second}).Draw(t, "ttl")}
			case op == 6 || op == 7:
				cl = pick()
				c = Command{Op: OpAcquire, Session: cl.id, Name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"), Owner: "S",
					Wait: rapid.SampledFrom([]time.Duration{0, 2 * time.Second}).Draw(t, "wait")}
			case op == 8 || op == 9:
				cl = pick()
				c = Command{Op: OpAdd, Session: cl.id, Name: "n", Token: fence.Token(rapid.IntRange(1, 3).Draw(t, "token")), Delta: 1}
			case op == 12: // a waiter's client went away
				rid := rapid.SampledFrom([]string{"x1", "x2"}).Draw(t, "rid")
				if o := pick(); o != nil && o.nextSeq > 0 && rapid.Bool().Draw(t, "session_rid") {
					rid = SessionRequestID(o.id, uint64(rapid.IntRange(1, int(o.nextSeq)).Draw(t, "cancel_seq")))
				}
				c = Command{Op: OpCancelWait, Name: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "name"), RequestID: rid}
			default: // retry an earlier seq
				cl = pick()
				if len(cl.sent) == 0 {
					c = Command{Op: OpTick}
					cl = nil
					break
				}
				seq := uint64(rapid.IntRange(1, int(cl.nextSeq)).Draw(t, "retry_seq"))
				c = cl.sent[seq]
				c.Ack = min(cl.ack, seq)
			}
			fresh := cl != nil && c.Seq == 0 && c.Op != OpTick
			if fresh && rapid.Bool().Draw(t, "sequenced") {
				cl.nextSeq++
				c.Seq = cl.nextSeq
				if rapid.Bool().Draw(t, "acks") {
					cl.ack = uint64(rapid.IntRange(int(cl.ack), int(c.Seq)).Draw(t, "ack"))
				}
				c.Ack = cl.ack
				cl.sent[c.Seq] = c
			}
			c.Now, c.Slack = now, slack
			log = append(log, c)
			r := m.Apply(c)
			results = append(results, describe(r))
			decided := max(m.expiryTime(), 0)
			if twin != nil {
				if got := describe(twin.Apply(c)); got != results[len(results)-1] {
					t.Fatalf("step %d %+v: restored twin %s, original %s", step, c, got, results[len(results)-1])
				}
			}

			// Track the session's life from what succeeded fresh.
			if r.Err == nil && !r.Replayed {
				switch c.Op {
				case OpSessionOpen:
					clients = append(clients, &sessClient{id: r.Session.ID, ttl: c.TTL, until: m.Now() + int64(c.TTL), sent: map[uint64]Command{}, first: map[uint64]Result{}})
				case OpSessionKeepAlive:
					if c.TTL != 0 {
						cl.ttl = c.TTL
					}
					cl.until = m.Now() + int64(cl.ttl)
				case OpSessionClose:
					cl.closed = true
				case OpRenew:
					if r.Session != nil {
						for _, o := range clients {
							if o.id == r.Session.ID {
								o.until = m.Now() + int64(o.ttl)
							}
						}
					}
				}
			}
			// G3 for sessions: never refused as expired while it must live.
			if cl != nil && errors.Is(r.Err, fence.ErrSessionExpired) && !cl.closed && cl.until > decided {
				t.Fatalf("step %d: session %d refused as expired at decision time %d, lives until %d", step, cl.id, decided, cl.until)
			}
			for _, e := range r.Events {
				if errors.Is(e.Err, fence.ErrSessionExpired) {
					id := e.Err.(*fence.SessionExpiredError).Session
					for _, o := range clients {
						if o.id == id && !o.closed && o.until > decided {
							t.Fatalf("step %d: session %d's waiter ended at %d, session lives until %d", step, id, decided, o.until)
						}
					}
				}
			}
			if r.Err == nil && !r.Replayed && c.Op == OpAdd {
				applied++
			}
			if c.Seq > 0 {
				if first, ok := cl.first[c.Seq]; !ok {
					cl.first[c.Seq] = r
				} else if r.Replayed && c.Op == OpAdd && (describe(Result{Err: first.Err, AddValue: first.AddValue}) != describe(Result{Err: r.Err, AddValue: r.AddValue})) {
					t.Fatalf("step %d: retry of seq %d answered %s, first %s", step, c.Seq, describe(r), describe(first))
				}
			}
			if got := m.Resource("n"); string(got.Value) != itoa(int64(applied)) && !(applied == 0 && len(got.Value) == 0) {
				t.Fatalf("step %d: n = %q after %d adds applied fresh", step, got.Value, applied)
			}

			// No lock is taken from a session-bound holder that must live.
			var grants []*fence.Lease
			cancelled := map[fence.Token]bool{} // granted by the cancel's settle, then released by it
			for _, e := range r.Events {
				if e.Lease != nil {
					grants = append(grants, e.Lease)
					cancelled[e.Lease.Token] = c.Op == OpCancelWait && e.RequestID == c.RequestID
				}
			}
			if r.Lease != nil && !r.Replayed {
				grants = append(grants, r.Lease)
			}
			if c.Op == OpRelease && r.Err == nil && holders[c.Name].tok == c.Token {
				delete(holders, c.Name)
			}
			if c.Op == OpCancelWait { // may release a granted wait
				if l := m.names.get(c.Name); l == nil || l.only() == nil || l.only().token != holders[c.Name].tok {
					delete(holders, c.Name)
				}
			}
			for _, g := range grants {
				if h, ok := holders[g.Name]; ok && h.tok != g.Token {
					if h.sess != 0 {
						for _, o := range clients {
							if o.id == h.sess && !o.closed && o.until > decided {
								t.Fatalf("step %d: lock %s granted (token %d) while session %d holding it lives until %d (decided %d)", step, g.Name, g.Token, h.sess, o.until, decided)
							}
						}
					} else if h.until > decided {
						t.Fatalf("step %d: lock %s granted while a standalone lease runs to %d", step, g.Name, h.until)
					}
				}
				if cancelled[g.Token] {
					delete(holders, g.Name)
					continue
				}
				h := holder{tok: g.Token, until: m.Now() + int64(g.Remaining)}
				if l := m.names.get(g.Name); l != nil && l.only() != nil && l.only().token == g.Token && l.only().sess != nil {
					h.sess = l.only().sess.id
				}
				holders[g.Name] = h
			}
			if c.Op == OpRenew && r.Err == nil && r.Session == nil {
				holders[c.Name] = holder{tok: c.Token, until: m.Now() + int64(r.Lease.Remaining)}
			}

			checkSessionLinks(t, m, clients)
			if twin == nil && rapid.IntRange(0, 9).Draw(t, "snapshot") == 0 {
				var b bytes.Buffer
				if _, err := m.SnapshotView().WriteTo(&b); err != nil {
					t.Fatal(err)
				}
				twin = New()
				if err := twin.Restore(&b); err != nil {
					t.Fatalf("step %d: restore: %v", step, err)
				}
			}
		}
		var want bytes.Buffer
		if err := m.Snapshot(&want); err != nil {
			t.Fatal(err)
		}
		replay := NewWithConfig(cfg)
		for i, c := range log {
			if got := describe(replay.Apply(c)); got != results[i] {
				t.Fatalf("replay step %d: %s, first run %s", i, got, results[i])
			}
		}
		for _, other := range []*Machine{replay, twin} {
			if other == nil {
				continue
			}
			var got bytes.Buffer
			if err := other.Snapshot(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("snapshot differs:\n%s\n%s", got.Bytes(), want.Bytes())
			}
		}
	})
}

// checkSessionLinks checks the machine's session bookkeeping against its
// locks, and the memory bound of saved results.
func checkSessionLinks(t *rapid.T, m *Machine, clients []*sessClient) {
	if m.Waiting() != len(m.Queued()) {
		t.Fatalf("waiting %d, queued %d", m.Waiting(), len(m.Queued()))
	}
	bound, waiting := 0, 0
	for id, s := range m.sessions {
		if s.id != id || s.expiresAt <= m.expiryTime() {
			t.Fatalf("session %d live past its expiry %d (decided %d)", id, s.expiresAt, m.expiryTime())
		}
		for tok, g := range s.leases {
			if g.token != tok || g.sess != s || m.names.get(g.name()).holderWith(tok) != g {
				t.Fatalf("session %d lists lease %d it does not hold", id, tok)
			}
		}
		bound += len(s.leases)
		for rid, w := range s.waiters {
			if w.sess != s || w.state != reqQueued || m.live[rid] != w {
				t.Fatalf("session %d lists waiter %q that is not queued", id, rid)
			}
		}
		waiting += len(s.waiters)
		var maxSeq uint64
		for _, c := range clients {
			if c.id == id {
				maxSeq = c.nextSeq
			}
		}
		for i, sv := range s.results {
			if sv.seq < s.floor || sv.seq > maxSeq || (i > 0 && s.results[i-1].seq >= sv.seq) {
				t.Fatalf("session %d: saved seq %d outside [floor %d, max seq %d] or out of order", id, sv.seq, s.floor, maxSeq)
			}
		}
		if c := m.cfg.MaxSessionResults; len(s.results) > c {
			t.Fatalf("session %d: %d saved results, cap %d", id, len(s.results), c)
		}
	}
	held, queued := 0, 0
	for _, l := range allLocks(m) {
		if l.only() != nil && l.only().sess != nil {
			if m.sessions[l.only().sess.id] != l.only().sess {
				t.Fatalf("lock %s held by ended session %d", l.name, l.only().sess.id)
			}
			held++
		}
		for _, w := range l.queue {
			if w.sess != nil {
				if w.sess.waiters[w.id] != w {
					t.Fatalf("lock %s: waiter %q of session %d not listed by it", l.name, w.id, w.sess.id)
				}
				queued++
			}
		}
	}
	if held != bound || queued != waiting {
		t.Fatalf("bound leases %d vs %d held, session waiters %d vs %d queued", bound, held, waiting, queued)
	}
}
