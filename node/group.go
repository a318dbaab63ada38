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
// There is no timer and no goroutine of its own: a command proposed while
// fewer than groupsInFlight groups are in flight leads a group at once, in
// its caller's goroutine (on an idle node, a group of one: no latency
// added); otherwise it waits in the queue. A leader takes everything queued
// (up to maxGroupCommands commands and about maxGroupBytes bytes), proposes
// it, waits for raft's answer, hands the lead to the first proposal still
// queued (whose caller then does the same), and answers its group — as
// etcd's proposal batching takes what queued while the last batch was
// being written. One group in flight is the default: with two, the second
// group is formed at once from the few commands there are (the log is
// kept busy, but groups are smaller), which measured slower on the WAL
// (about 11,000 against 28,000 acquire+release cycles/s at 64 proposers,
// BenchmarkGroupsInFlight; /tmp/fence7/notes-node.md).
//
// Stamps (doc.go, Expiry and G3): a group is stamped once, right before it
// is handed to raft, with one ticket of the term's commit-lag bookkeeping;
// all its commands carry that Now and Slack. For G3 the group is one
// command that starts every lease its commands start: when raft answers
// it, its lag is charged until the longest of them runs out. A command
// waiting in the queue is not stamped yet: its wait is not lag.
//
// Every proposal gets exactly one answer: its own Result, or, for the whole
// group, the error raft gave it (ErrNotLeader, ErrUnknownOutcome, ...). A
// proposal still queued when its context ends is withdrawn (ctx.Err(),
// nothing proposed); a group formed once the node is closing or has failed
// is answered ErrClosed without being proposed.

const (
	// groupsInFlight bounds the groups being proposed or in flight.
	groupsInFlight = 1
	// maxGroupCommands bounds the commands of one group.
	maxGroupCommands = 1024
	// maxGroupBytes bounds the encoded commands of one group (a group
	// always takes at least one command, whatever its size).
	maxGroupBytes = 1 << 20
)

// proposal is one command waiting for its group.
type proposal struct {
	c     *leaderClock // the clock it is stamped with; a group has one
	data  []byte       // the command encoded with Now = 0 and Slack = 0
	now   int64        // the group's stamp, set when it is proposed
	slack time.Duration
	// done (cap 2) carries true once if the caller is handed the lead (it
	// must lead the next group, then wait on), and false once when res
	// and err hold its answer.
	done chan bool
	res  state.Result
	err  error
	gone bool // withdrawn by its caller (guarded by proposer.mu)
	lead bool // its caller leads or was handed the lead (guarded by proposer.mu)
}

// proposer is the queue of proposals and the count of leaders.
type proposer struct {
	mu      sync.Mutex
	queue   []*proposal
	leaders int // groups being formed or in flight (at most limit)
	limit   int

	groups   atomic.Uint64 // log entries proposed
	commands atomic.Uint64 // commands in them
}

func newProposer(inFlight int) *proposer {
	if inFlight <= 0 {
		inFlight = groupsInFlight
	}
	return &proposer{limit: inFlight}
}

// enqueue queues p; lead reports that p's caller must lead a group now.
func (pr *proposer) enqueue(p *proposal) (lead bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.queue = append(pr.queue, p)
	if pr.leaders < pr.limit {
		pr.leaders++
		p.lead = true // leading already: never handed the lead as well
		return true
	}
	return false
}

// withdraw takes p out of the queue; false if it is already in a group or
// its caller leads (its answer will come).
func (pr *proposer) withdraw(p *proposal) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if p.lead {
		return false
	}
	for _, q := range pr.queue {
		if q == p {
			p.gone = true
			return true
		}
	}
	return false
}

// queued is the number of proposals waiting for a group (withdrawn ones
// included until a group skips them).
func (pr *proposer) queued() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.queue)
}

// take removes the next group from the queue: the proposals in order that
// share the first one's clock, up to the bounds. If none is queued, the
// caller stops leading: nil.
func (pr *proposer) take() []*proposal {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var g []*proposal
	var c *leaderClock
	bytes, i := 0, 0
	for ; i < len(pr.queue); i++ {
		p := pr.queue[i]
		if p.gone {
			continue
		}
		if len(g) > 0 && (p.c != c || len(g) == maxGroupCommands || bytes+len(p.data) > maxGroupBytes) {
			break
		}
		c = p.c
		g = append(g, p)
		bytes += len(p.data)
	}
	n := copy(pr.queue, pr.queue[i:])
	clear(pr.queue[n:])
	pr.queue = pr.queue[:n]
	if len(g) == 0 {
		pr.leaders--
	}
	return g
}

// handOff passes a finished leader's lead to the first proposal still
// queued, or ends it if none is.
func (pr *proposer) handOff() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, p := range pr.queue {
		if !p.gone && !p.lead {
			p.lead = true
			p.done <- true
			return
		}
	}
	pr.leaders--
}

// proposeWith runs cmd through raft in a group stamped with the leader
// clock c (doc.go, Expiry and G3) and returns its result. cmd is left as
// stamped. takeOffice proposes with its clock before publishing it.
func (n *Node) proposeWith(ctx context.Context, c *leaderClock, cmd *state.Command) (state.Result, error) {
	cmd.Now, cmd.Slack = 0, 0
	data, err := cmd.MarshalBinary()
	if err != nil {
		return state.Result{}, fmt.Errorf("node: encode command: %w", err)
	}
	p := proposalPool.Get().(*proposal)
	p.c, p.data = c, data
	if n.props.enqueue(p) {
		n.leadGroup()
	}
	ctxDone, closing := ctx.Done(), n.closing
	for {
		select {
		case lead := <-p.done:
			if lead {
				n.leadGroup()
				continue
			}
			cmd.Now, cmd.Slack = p.now, p.slack
			res, err := p.res, p.err
			// Answered: nothing refers to p any more (its lead, if any,
			// came first; its group is done with it).
			*p = proposal{done: p.done}
			proposalPool.Put(p)
			return res, err
		case <-ctxDone:
			if n.props.withdraw(p) {
				return state.Result{}, ctx.Err() // p stays queued until a take drops it: not reused
			}
			ctxDone = nil // in a group, or leading: its answer comes
		case <-closing:
			// A queued proposal does not wait for a leader that may wait
			// on a future raft never answers after Shutdown.
			if n.props.withdraw(p) {
				return state.Result{}, ErrClosed
			}
			closing = nil
		}
	}
}

// proposalPool recycles answered proposals (and their channels): a
// proposal is about as large as a Result.
var proposalPool = sync.Pool{New: func() any { return &proposal{done: make(chan bool, 2)} }}

// leadGroup takes the next group from the queue, proposes it, hands the
// lead on and answers the group's proposals.
func (n *Node) leadGroup() {
	g := n.props.take()
	if len(g) == 0 {
		return
	}
	res, err := n.runGroup(g)
	n.props.handOff()
	for i, p := range g {
		if err != nil {
			p.err = err
		} else {
			p.res = res[i]
		}
		p.done <- false
	}
}

// runGroup stamps group g, proposes it as one entry and waits for raft's
// answer: the results in order, or the one error every command of the
// group gets.
func (n *Node) runGroup(g []*proposal) ([]state.Result, error) {
	select {
	case <-n.closing:
		return nil, ErrClosed
	case <-n.fail.Down():
		return nil, fmt.Errorf("%w: fatal storage error: %v", ErrClosed, n.fail.Err())
	default:
	}
	c := g[0].c
	now, slack, ticket := c.lag.stamp(c)
	size := groupHeaderMax
	for _, p := range g {
		size += len(p.data) + binary.MaxVarintLen64
	}
	data := appendGroupHeader(make([]byte, 0, size), now, slack, len(g))
	for _, p := range g {
		p.now, p.slack = now, slack
		data = appendGroupCommand(data, p.data)
	}
	// A clock of an earlier term must not stamp a command of a later one
	// (its slack bookkeeping does not cover what the leaders between
	// charged: leaderClock). Nothing is proposed yet: ErrNotLeader.
	if n.raft.CurrentTerm() != c.term {
		c.lag.done(c, ticket, false, 0)
		return nil, fmt.Errorf("%w: the term of office (%d) has ended", ErrNotLeader, c.term)
	}
	n.props.groups.Add(1)
	n.props.commands.Add(uint64(len(g)))
	// No enqueue timeout: raft's apply queue holds MaxAppendEntries
	// entries, more than the groups in flight, so this does not block.
	// Waited on directly, not through Node.await: a goroutine per
	// proposal cost ~10% of throughput at 64 proposers. raft answers
	// every future it has taken when it loses leadership (also after a
	// fatal store error); only one still queued at Shutdown is never
	// answered, and Close comes after the server has drained its
	// requests.
	f := n.raft.Apply(data, 0)
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
	case []state.Result:
		var longest time.Duration
		for _, res := range r {
			longest = max(longest, longestStarted(res))
		}
		c.lag.done(c, ticket, true, longest)
		if len(r) != len(g) {
			return nil, fmt.Errorf("node: group of %d commands answered with %d results", len(g), len(r))
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
