package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenceworks/fence/state"
)

// Group commit: the commands that queue while earlier groups are in
// flight are written as one raft log entry (groupcodec.go), so N concurrent
// commands cost one raft future, one log entry and one FSM dispatch instead
// of N.
//
// There is no timer. A command proposed while fewer than groupsInFlight
// groups are being led leads one group at once, in its caller's goroutine
// (on an idle node, a group of one: no hand-off, no latency added): it
// takes everything queued (up to maxGroupCommands commands and about
// maxGroupBytes bytes), proposes it and waits for raft's answer. If more
// queued meanwhile, it hands its slot to a commit loop (one goroutine per
// group in flight, commitLoop) before it answers its group; the loop then
// takes, proposes, waits for and answers group after group until the
// queue is empty — as etcd's proposal batching takes what queued while the
// last batch was being written. Under load callers only enqueue and wait,
// and between one group's answer and the next group's append no other
// goroutine is woken. One group in flight is the default: with two, the
// second group is formed at once from the few commands there are (the log
// is kept busy, but groups are smaller), which measured slower on the WAL
// (about 11,000 against 28,000 acquire+release cycles/s at 64 proposers,
// BenchmarkGroupsInFlight; /tmp/fence7/notes-node.md).
//
// A proposal is a pooled struct with its encoding buffer and one wake-up
// channel; its answer is written into it (a result slot) before the wake.
// A group is pooled too, and records the generation of every proposal it
// took: an answer for a proposal that was reused since (its caller gone) is
// dropped and counted (proposer.misrouted), never delivered to the new
// caller. A waiter selects on its context only: Close answers the queued
// proposals itself (proposer.close), so the waiters do not all queue on
// the node's one closing channel.
//
// Stamps (doc.go, Expiry and G3): a group is stamped once, right before it
// is handed to raft, with one ticket of the term's commit-lag bookkeeping;
// all its commands carry that Now and Slack. For G3 the group is one
// command that starts every lease its commands start: when raft answers
// it, its lag is charged until the longest of them runs out, before the
// next group is stamped. A command waiting in the queue is not stamped
// yet: its wait is not lag.
//
// Every proposal gets exactly one answer: its own Result, or, for the whole
// group, the error raft gave it (ErrNotLeader, ErrUnknownOutcome, ...). A
// proposal still queued when its context ends is withdrawn (ctx.Err(),
// nothing proposed); a proposal queued when the node closes, or a group
// formed once the node is closing or has failed, is answered ErrClosed
// without being proposed.

const (
	// groupsInFlight bounds the groups being proposed or in flight.
	groupsInFlight = 1
	// maxGroupCommands bounds the commands of one group.
	maxGroupCommands = 1024
	// maxGroupBytes bounds the encoded commands of one group (a group
	// always takes at least one command, whatever its size).
	maxGroupBytes = 1 << 20
	// maxPooledBuf bounds the encoding buffer a pooled proposal keeps.
	maxPooledBuf = 4 << 10
)

// proposal is one command waiting for its group: a result slot and a
// wake-up channel, pooled.
type proposal struct {
	c     *leaderClock // the clock it is stamped with; a group has one
	data  []byte       // the command encoded with Now = 0 and Slack = 0 (in buf)
	buf   []byte       // the encoding buffer, kept across reuses
	gen   uint64       // bumped every time the proposal is taken from the pool
	now   int64        // the group's stamp, set when it is proposed
	slack time.Duration
	// done (cap 1) is sent to once, when res and err hold its answer.
	done  chan struct{}
	res   state.Result
	err   error
	taken bool // in a group: no longer withdrawable (guarded by proposer.mu)
}

// groupMember is a proposal in a group, with the generation it had when taken.
type groupMember struct {
	p   *proposal
	gen uint64
}

// group is a group being proposed: its members in order, and once handed
// to raft, its future and its commit-lag ticket; or err, the answer of a
// group that was not proposed.
type group struct {
	m      []groupMember
	c      *leaderClock
	f      raft.ApplyFuture
	ticket uint64
	err    error
}

// proposer is the queue of proposals and the count of leaders.
type proposer struct {
	mu      sync.Mutex
	queue   []*proposal
	leaders int           // groups being led (at most limit): by a caller or a commit loop
	limit   int           // groups in flight at most; as many commit loops
	wake    chan struct{} // cap limit: hands a leader's slot to a commit loop
	closed  bool          // Close answered the queue: no proposal is queued any more

	groups    atomic.Uint64 // log entries proposed
	commands  atomic.Uint64 // commands in them
	misrouted atomic.Uint64 // answers dropped: their proposal was reused (a bug)
}

func newProposer(inFlight int) *proposer {
	if inFlight <= 0 {
		inFlight = groupsInFlight
	}
	return &proposer{limit: inFlight, wake: make(chan struct{}, inFlight)}
}

// enqueue queues p; lead reports that p's caller must lead a group now
// (Node.leadOnce): fewer than limit groups are being led. A proposer that
// is closed refuses p (ok false).
func (pr *proposer) enqueue(p *proposal) (lead, ok bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return false, false
	}
	pr.queue = append(pr.queue, p)
	if pr.leaders < pr.limit {
		pr.leaders++
		return true, true
	}
	return false, true
}

// keepLead reports whether proposals are queued: the finished leader's
// slot then goes on (to a commit loop); if none is, the slot ends.
func (pr *proposer) keepLead() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if len(pr.queue) > 0 {
		return true
	}
	pr.leaders--
	return false
}

// withdraw takes p out of the queue; false if it is already in a group
// (its answer will come). A withdrawn proposal is in no queue or group: it
// may be reused.
func (pr *proposer) withdraw(p *proposal) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if p.taken {
		return false
	}
	for i, q := range pr.queue {
		if q == p {
			pr.queue = append(pr.queue[:i], pr.queue[i+1:]...)
			pr.queue[len(pr.queue):cap(pr.queue)][0] = nil
			return true
		}
	}
	return false
}

// close answers every queued proposal with err, empties the queue, and
// refuses proposals from now on. The commit loops stop (Node.commitLoop).
func (pr *proposer) close(err error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.closed = true
	for _, p := range pr.queue {
		p.err = err
		p.done <- struct{}{}
	}
	clear(pr.queue)
	pr.queue = pr.queue[:0]
}

// queued is the number of proposals waiting for a group.
func (pr *proposer) queued() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.queue)
}

// groupPool recycles groups (and their member slices).
var groupPool = sync.Pool{New: func() any { return new(group) }}

// take removes the next group from the queue: the proposals in order that
// share the first one's clock, up to the bounds, each marked taken (no
// longer withdrawable). If none is queued, the caller's slot ends: nil.
func (pr *proposer) take() *group {
	g := groupPool.Get().(*group)
	pr.mu.Lock()
	var c *leaderClock
	bytes, i := 0, 0
	for ; i < len(pr.queue); i++ {
		p := pr.queue[i]
		if len(g.m) > 0 && (p.c != c || len(g.m) == maxGroupCommands || bytes+len(p.data) > maxGroupBytes) {
			break
		}
		c = p.c
		p.taken = true
		g.m = append(g.m, groupMember{p, p.gen})
		bytes += len(p.data)
	}
	n := copy(pr.queue, pr.queue[i:])
	clear(pr.queue[n:])
	pr.queue = pr.queue[:n]
	if len(g.m) == 0 {
		pr.leaders--
	}
	pr.mu.Unlock()
	if len(g.m) == 0 {
		groupPool.Put(g)
		return nil
	}
	g.c = c
	return g
}

// proposeWith runs cmd through raft in a group stamped with the leader
// clock c (doc.go, Expiry and G3) and returns its result. cmd is left as
// stamped. takeOffice proposes with its clock before publishing it.
func (n *Node) proposeWith(ctx context.Context, c *leaderClock, cmd *state.Command) (state.Result, error) {
	cmd.Now, cmd.Slack = 0, 0
	p := proposalPool.Get().(*proposal)
	data, err := cmd.AppendBinary(p.buf[:0])
	if err != nil {
		proposalPool.Put(p)
		return state.Result{}, fmt.Errorf("node: encode command: %w", err)
	}
	p.gen++
	p.c, p.data, p.buf = c, data, data
	lead, ok := n.props.enqueue(p)
	if !ok {
		putProposal(p)
		return state.Result{}, ErrClosed
	}
	if lead {
		n.leadOnce()
	}
	if ctxDone := ctx.Done(); ctxDone != nil {
		select {
		case <-p.done:
		case <-ctxDone:
			if n.props.withdraw(p) {
				putProposal(p)
				return state.Result{}, ctx.Err()
			}
			<-p.done // in a group: its answer comes
		}
	} else {
		<-p.done
	}
	cmd.Now, cmd.Slack = p.now, p.slack
	res, err := p.res, p.err
	// Answered: nothing refers to p any more (its group is done with it).
	putProposal(p)
	return res, err
}

// proposalPool recycles answered or withdrawn proposals (their channels
// and encoding buffers).
var proposalPool = sync.Pool{New: func() any { return &proposal{done: make(chan struct{}, 1)} }}

// putProposal clears p (keeping its channel, buffer and generation) and
// pools it.
func putProposal(p *proposal) {
	buf := p.buf[:0]
	if cap(buf) > maxPooledBuf {
		buf = nil
	}
	*p = proposal{done: p.done, buf: buf, gen: p.gen}
	proposalPool.Put(p)
}

// leadOnce leads one group in the caller's goroutine (an idle node adds
// no hand-off: the caller proposes its own command at once). If more
// queued meanwhile, it hands its slot to a commit loop before it answers
// the group; under load the loops lead and callers only wait.
func (n *Node) leadOnce() {
	g := n.props.take()
	if g == nil {
		return
	}
	n.submit(g)
	res, err := n.finish(g)
	if n.props.keepLead() {
		n.props.wake <- struct{}{} // never blocks: at most limit slots
	}
	n.answer(g, res, err)
}

// commitLoop is one of the node's commit loops (proposer.limit of them,
// one by default), started by Open. Handed a slot, it leads while
// proposals are queued: it takes the next group, proposes it, waits for
// raft's answer and answers the group, then takes the next; between one
// group's answer and the next group's append it wakes no other goroutine,
// and the group is proposed right before it parks on the future, so
// raft's leader loop runs next on its P. Its stack stays grown. It returns
// once the node is closing (Close answers what is queued).
func (n *Node) commitLoop() {
	pr := n.props
	for {
		select {
		case <-pr.wake:
		case <-n.closing:
			return
		}
		for {
			g := pr.take()
			if g == nil {
				break // the slot ended
			}
			n.submit(g)
			res, err := n.finish(g)
			n.answer(g, res, err)
		}
	}
}

// answer gives every proposal of g its result (or err) and wakes it, then
// pools g. A proposal reused since g took it is not touched (misrouted).
func (n *Node) answer(g *group, res *groupResults, err error) {
	for i, m := range g.m {
		p := m.p
		if p.gen != m.gen {
			n.props.misrouted.Add(1)
			n.cfg.Logger.Error("node: a group answer for a proposal reused meanwhile was dropped (bug)", "gen", m.gen, "now", p.gen)
			continue
		}
		if err != nil {
			p.err = err
		} else {
			p.res = res.rs[i]
		}
		p.done <- struct{}{}
	}
	if res != nil {
		putGroupResults(res)
	}
	clear(g.m)
	*g = group{m: g.m[:0]}
	groupPool.Put(g)
}

// submit stamps group g and proposes it as one entry (g.f), or sets g.err
// when it cannot be proposed.
func (n *Node) submit(g *group) {
	select {
	case <-n.closing:
		g.err = ErrClosed
		return
	case <-n.fail.Down():
		g.err = fmt.Errorf("%w: fatal storage error: %v", ErrClosed, n.fail.Err())
		return
	default:
	}
	c := g.c
	now, slack, ticket := c.lag.stamp(c)
	size := groupHeaderMax
	for _, m := range g.m {
		size += len(m.p.data) + binary.MaxVarintLen64
	}
	// Not pooled: raft keeps the entry (its log cache, replication).
	data := appendGroupHeader(make([]byte, 0, size), now, slack, len(g.m))
	for _, m := range g.m {
		m.p.now, m.p.slack = now, slack
		data = appendGroupCommand(data, m.p.data)
	}
	// A clock of an earlier term must not stamp a command of a later one
	// (its slack bookkeeping does not cover what the leaders between
	// charged: leaderClock). Nothing is proposed yet: ErrNotLeader.
	if n.raft.CurrentTerm() != c.term {
		c.lag.done(c, ticket, false, 0)
		g.err = fmt.Errorf("%w: the term of office (%d) has ended", ErrNotLeader, c.term)
		return
	}
	n.props.groups.Add(1)
	n.props.commands.Add(uint64(len(g.m)))
	// No enqueue timeout: raft's apply queue holds MaxAppendEntries
	// entries, more than the groups in flight, so this does not block.
	g.ticket = ticket
	g.f = n.raft.Apply(data, 0)
}

// finish waits for raft's answer to group g: the results in order, or the
// one error every command of the group gets. Waited on directly, not
// through Node.await: a goroutine per proposal cost ~10% of throughput at
// 64 proposers. raft answers every future it has taken when it loses
// leadership (also after a fatal store error); only one still queued at
// Shutdown is never answered, and Close comes after the server has
// drained its requests.
func (n *Node) finish(g *group) (*groupResults, error) {
	if g.err != nil {
		return nil, g.err
	}
	c, ticket, f := g.c, g.ticket, g.f
	err := f.Error()
	if err != nil {
		c.lag.done(c, ticket, false, 0)
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			// Refused before it was appended.
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		case errors.Is(err, raft.ErrLeadershipLost):
			// Appended, maybe committed by the next leader. Not
			// ErrNotLeader: that one says nothing was proposed, so the
			// command may be sent elsewhere without its id.
			return nil, fmt.Errorf("%w: leadership lost with the command in flight: %v", ErrUnknownOutcome, err)
		}
		// Shut down with the entry in flight (it may be committed and
		// applied on replay), or a log write failed (fail-stop).
		return nil, n.unknown(err)
	}
	if err := n.fail.Err(); err != nil {
		// Committed before the failure perhaps, but this node stopped
		// acknowledging when it failed: the client retries elsewhere or
		// after the restart, which answers from the log.
		c.lag.done(c, ticket, false, 0)
		return nil, n.unknown(err)
	}
	switch r := f.Response().(type) {
	case *groupResults:
		var longest time.Duration
		for _, res := range r.rs {
			longest = max(longest, longestStarted(res))
		}
		c.lag.done(c, ticket, true, longest)
		if len(r.rs) != len(g.m) {
			return nil, fmt.Errorf("node: group of %d commands answered with %d results", len(g.m), len(r.rs))
		}
		return r, nil
	case error:
		c.lag.done(c, ticket, true, 0)
		return nil, r
	default:
		c.lag.done(c, ticket, true, 0)
		return nil, fmt.Errorf("node: unexpected apply response %T", r)
	}
}
