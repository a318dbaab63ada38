package node

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/state"
)

// groupEntry is one command log entry decoded: its index and commands (each
// carries the entry's one Now and Slack).
type groupEntry struct {
	index uint64
	cmds  []state.Command
}

// entryOf finds the command entry from index from on holding a command
// named name.
func entryOf(t *testing.T, n *Node, from uint64, name string) groupEntry {
	t.Helper()
	last, err := n.log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i <= last; i++ {
		var l raft.Log
		if err := n.log.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cs, err := decodeEntry(l.Data)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		for _, c := range cs {
			if c.Name == name {
				return groupEntry{i, cs}
			}
		}
	}
	t.Fatalf("no entry from %d on holds %q", from, name)
	return groupEntry{}
}

// untilProposed waits until k commands were handed to raft (stamped) since
// commands0. A hang guard, not a timing assertion.
func untilProposed(t *testing.T, n *Node, commands0 uint64, k int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for int(n.props.commands.Load()-commands0) < k {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d commands proposed", n.props.commands.Load()-commands0, k)
		}
		time.Sleep(time.Millisecond)
	}
}

// G3 for a group (group.go, Stamps): a group is one command that starts
// every lease its commands start, so its commit lag is charged until the
// LONGEST of their TTLs has run out from the moment it was seen committed —
// not the first command's, not the last's. Three acquires queue (in a known
// order) behind a group whose write is held up at the log store, go to raft
// as one entry, and the longest TTL is the middle one's. The charge
// recorded is (until, lag) with until = seen + d and lag = seen - Now, so
// until - lag = Now + d must be exact for d = the middle command's TTL.
// Planted: runGroup taking longestStarted(r[0]) or (r[len(r)-1]) — caught,
// the charge ends 2h (resp. 1h) early: a later command would be stamped
// with no slack while the 3h lease still needs it.
func TestGroupChargesItsLongestLease(t *testing.T) {
	n, gate := openGated(t, t.TempDir(), nil)
	c := n.clock.Load()
	from := n.raft.LastIndex() + 1
	commands0 := n.props.commands.Load()

	gate.close()
	front := applyAsync(n, context.Background(), acquire("front", time.Second))
	untilProposed(t, n, commands0, 1) // front is in flight, held at the log store
	// Queued one at a time, so the queue (and the group) is in this order.
	ttls := []struct {
		name string
		ttl  time.Duration
	}{{"first", time.Hour}, {"longest", 3 * time.Hour}, {"last", 2 * time.Hour}}
	var answers []<-chan applied
	for i, l := range ttls {
		answers = append(answers, applyAsync(n, context.Background(), acquire(l.name, l.ttl)))
		untilQueued(t, n, commands0, 2+i)
	}
	if q := n.props.queued(); q != len(ttls) {
		t.Fatalf("%d proposals queued behind the held group, want %d", q, len(ttls))
	}
	gate.open()
	if a := <-front; a.err != nil || a.res.Lease == nil {
		t.Fatalf("front: %+v, %v", a.res, a.err)
	}
	for i, ch := range answers {
		if a := <-ch; a.err != nil || a.res.Lease == nil || a.res.Lease.TTL != ttls[i].ttl {
			t.Fatalf("%s: %+v, %v; want a lease of %v", ttls[i].name, a.res, a.err, ttls[i].ttl)
		}
	}

	// They went as one group, in queue order, stamped once.
	e := entryOf(t, n, from, "longest")
	if len(e.cmds) != len(ttls) {
		t.Fatalf("entry %d holds %d commands, want the %d queued as one group", e.index, len(e.cmds), len(ttls))
	}
	for i, cmd := range e.cmds {
		if cmd.Name != ttls[i].name || cmd.Now != e.cmds[0].Now {
			t.Fatalf("entry %d command %d: %s stamped %d, want %s stamped %d", e.index, i, cmd.Name, cmd.Now, ttls[i].name, e.cmds[0].Now)
		}
	}
	now := e.cmds[0].Now

	// The group is the last command that started a lease: its charge is the
	// last one recorded (ticks start none).
	last, _ := c.lag.lastCharge()
	if got, want := time.Duration(last.until-last.lag-now), 3*time.Hour; got != want {
		t.Fatalf("the group's lag (%v) is charged for %v after its stamp plus the lag, want %v: the longest lease of the group (TTLs %v, %v, %v in queue order)",
			time.Duration(last.lag), got, want, ttls[0].ttl, ttls[1].ttl, ttls[2].ttl)
	}
	// And it is live in the charges (or covered by one lasting as long and
	// at least as large) for commands stamped now.
	covered := last.lag <= 0 // a lag of 0 needs no charge
	for _, ch := range c.lag.charged() {
		if ch.until >= last.until && ch.lag >= last.lag {
			covered = true
		}
	}
	if !covered {
		t.Fatalf("the group's charge %v is not among the charges %v", last, c.lag.charged())
	}
}

// The slack a group carries covers the oldest group still in flight (the
// longest-waiting one), not the newest: with three groups in flight (the
// first held at the log store), the third is stamped with Slack >= its Now
// minus the FIRST group's Now. Values read back from the log.
// Planted: slackAt using the newest flight (l.flight[len(l.flight)-1])
// instead of l.flight[l.head] — caught: Slack = Now3 - Now2 < Now3 - Now1.
func TestGroupSlackCoversOldestGroupInFlight(t *testing.T) {
	g := &gateLog{}
	n, err := Open(Config{DataDir: t.TempDir(), Logger: quietLogger(), groupsInFlight: 3,
		wrapLog: func(s raft.LogStore) raft.LogStore { g.LogStore = s; return g }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.open(); n.Close() })
	from := n.raft.LastIndex() + 1
	commands0 := n.props.commands.Load()

	g.close()
	names := []string{"oldest", "middle", "newest"}
	var answers []<-chan applied
	for i, name := range names {
		answers = append(answers, applyAsync(n, context.Background(), acquire(name, time.Hour)))
		untilProposed(t, n, commands0, i+1) // each leads its own group
	}
	g.open()
	for i, ch := range answers {
		if a := <-ch; a.err != nil || a.res.Lease == nil {
			t.Fatalf("%s: %+v, %v", names[i], a.res, a.err)
		}
	}
	var es []state.Command
	for _, name := range names {
		e := entryOf(t, n, from, name)
		if len(e.cmds) != 1 {
			t.Fatalf("%s went in a group of %d, want its own", name, len(e.cmds))
		}
		es = append(es, e.cmds[0])
	}
	if !(es[0].Now < es[1].Now && es[1].Now < es[2].Now) {
		t.Fatalf("stamps %d, %d, %d: want them increasing", es[0].Now, es[1].Now, es[2].Now)
	}
	for i := 1; i < len(es); i++ {
		if want := time.Duration(es[i].Now - es[0].Now); es[i].Slack < want {
			t.Fatalf("%s stamped while %s was in flight carries slack %v, want at least %v (its Now minus the oldest in flight's)",
				names[i], names[0], es[i].Slack, want)
		}
	}
}
