package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// closedChan is a closed channel: a wait on it ends at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// cancelWaitTimeout bounds the OpCancelWait proposed for a waiter whose
// caller went away.
const cancelWaitTimeout = 5 * time.Second

// Apply proposes cmd through raft and returns its state.Result once it is
// committed (fsync'd) and applied. The node sets cmd.Now from its leader
// clock; the caller's value is ignored.
//
// An OpAcquire with Wait > 0 that is queued does not return until its
// Event arrives (granted; the wait ran out: Result.Err is a
// *fence.BusyError with Waited; or, for a session-bound acquire, its
// session ended: a *fence.SessionExpiredError) or ctx ends; see the
// package doc for what happens to a waiter whose context ends. A
// session-bound acquire with a Seq and no RequestID is given
// state.SessionRequestID(Session, Seq), so a retry of the same seq (Seq >
// 0, even with Wait 0: it may be the retry of a queued one) waits for the
// same Event.
//
// Session commands (OpSessionOpen, OpSessionKeepAlive, OpSessionClose) and
// sequenced commands are proposed like any other; a retry of a sequenced
// command returns the saved Result (Replayed).
//
// The error is nil, ErrNotLeader (nothing was applied), ErrClosed (the node
// is closed or failed; nothing was proposed), ctx.Err() (a waiting acquire
// abandoned, or the proposal never reached raft), or an error wrapping
// ErrUnknownOutcome (the command may have been applied: retry it with the
// same op_id or request_id); a Fence refusal is Result.Err.
func (n *Node) Apply(ctx context.Context, cmd state.Command) (state.Result, error) {
	// The caller's principal, as the server authenticated it, goes in the
	// command: the machine records it with what the command creates and
	// checks it against what the command touches (state/auth.go).
	if p, ok := fence.PrincipalFrom(ctx); ok {
		cmd.Principal, cmd.Admin = p.Name, p.Admin
	}
	// A sequenced session-bound acquire is known by its session and seq:
	// the machine gives it that request_id when it has none, and its
	// waiter must be registered under the same one.
	if cmd.Op == state.OpAcquire && cmd.Session != 0 && cmd.Seq > 0 && cmd.RequestID == "" {
		cmd.RequestID = state.SessionRequestID(cmd.Session, cmd.Seq)
	}
	// An acquire with a request_id may be the retry of a queued one (even
	// with Wait 0): it waits for the Event like the first attempt.
	if cmd.Op == state.OpAcquire && (cmd.Wait > 0 || cmd.RequestID != "") {
		return n.acquireWaiting(ctx, cmd)
	}
	return n.propose(ctx, &cmd)
}

// propose stamps cmd with the leader clock (Now, and the Slack that covers
// the commit lag: doc.go, Expiry and G3) and runs it through raft. cmd is
// left as stamped.
func (n *Node) propose(ctx context.Context, cmd *state.Command) (state.Result, error) {
	select {
	case <-n.closing:
		return state.Result{}, ErrClosed
	case <-n.fail.Down():
		return state.Result{}, fmt.Errorf("%w: fatal storage error: %v", ErrClosed, n.fail.Err())
	default:
	}
	c := n.office()
	if c == nil {
		return state.Result{}, ErrNotLeader
	}
	return n.proposeWith(ctx, c, cmd)
}

// unknown wraps cause in ErrUnknownOutcome, and in ErrClosed when the node
// is closed or has failed.
func (n *Node) unknown(cause error) error {
	select {
	case <-n.closing:
		return fmt.Errorf("%w (%w): %v", ErrUnknownOutcome, ErrClosed, cause)
	case <-n.fail.Down():
		return fmt.Errorf("%w (%w: fatal storage error): %v", ErrUnknownOutcome, ErrClosed, cause)
	default:
		return fmt.Errorf("%w: %v", ErrUnknownOutcome, cause)
	}
}

// longestStarted is the longest TTL among the leases res started: its grant
// or renewal, every lock it handed to a waiter (also those a session's end
// freed), and the session period it started (an open or keepalive extends
// the session, and with it every lease bound to it, by Session.TTL), 0 if
// none. Only these need the command's commit lag charged (doc.go, G3).
func longestStarted(res state.Result) time.Duration {
	var d time.Duration
	if res.Lease != nil {
		d = res.Lease.TTL
	}
	if res.Session != nil {
		d = max(d, res.Session.TTL)
	}
	for _, ev := range res.Events {
		if ev.Lease != nil {
			d = max(d, ev.Lease.TTL)
		}
	}
	return d
}

// waitName is the lock an acquire's cancel names: its own, or its set's
// first (by name; the state cancels a set's wait on every lock by any of
// them). A set's acquire has no Name: a cancel naming "" was refused, and
// an outside test saw set waits whose clients had gone granted to nobody.
func waitName(cmd state.Command) string {
	if cmd.Name == "" && len(cmd.Locks) > 0 {
		return fence.SortLocks(cmd.Locks)[0].Name
	}
	return cmd.Name
}

// acquireWaiting runs a blocking acquire: register the waiter, propose,
// and if queued wait for the Event. The wait is bounded by cmd.Wait plus
// Config.WaitMargin even when ctx has no deadline: the machine ends the
// wait at cmd.Wait (an Event), so the margin only covers a retry of a
// request queued earlier (whose own wait may end later) and commit lag.
func (n *Node) acquireWaiting(ctx context.Context, cmd state.Command) (state.Result, error) {
	if cmd.RequestID == "" {
		cmd.RequestID = newRequestID()
	}
	ch := n.wait.add(cmd.RequestID)
	defer n.wait.remove(cmd.RequestID, ch)
	res, err := n.propose(ctx, &cmd)
	if err != nil {
		// Another attempt here may have left the queue entry to this one
		// (endAttempt): if this was the last, withdraw it as that one
		// would have (a no-op if this attempt was applied after all).
		if last, highest := n.wait.leave(cmd.RequestID, ch, 0); last && highest > 0 {
			n.abandonWait(waitName(cmd), cmd.RequestID, highest)
		}
		return res, err
	}
	if !res.Queued {
		return res, nil
	}
	n.wait.saw(cmd.RequestID, res.Attempt)
	// The Event comes from the log, so it would reach this node as a
	// follower too; but a node that left office is no longer where the
	// client's wait is kept: the new leader withdraws queued acquires no
	// client re-attached to within Config.WaiterGrace (orphans.go). So the
	// caller is told at once that the outcome is unknown, and retries with
	// the same request_id at the new leader, which re-attaches it.
	var deposed <-chan struct{}
	if c := n.clock.Load(); c != nil {
		deposed = c.gone
	} else {
		deposed = closedChan
	}
	bound := time.NewTimer(cmd.Wait + n.cfg.WaitMargin)
	defer bound.Stop()
	select {
	case ev := <-ch:
		return state.Result{Lease: ev.Lease, Err: ev.Err, Events: res.Events}, nil
	case <-ctx.Done():
		n.endAttempt(waitName(cmd), cmd.RequestID, ch, res.Attempt)
		return state.Result{}, ctx.Err()
	case <-bound.C:
		select {
		case ev := <-ch: // it came just now
			return state.Result{Lease: ev.Lease, Err: ev.Err, Events: res.Events}, nil
		default:
		}
		if err := n.endAttempt(waitName(cmd), cmd.RequestID, ch, res.Attempt); err != nil {
			return state.Result{}, fmt.Errorf("%w: a wait past its bound could not be withdrawn: %v", ErrUnknownOutcome, err)
		}
		// Withdrawn (or, had the grant won the race, released), or left
		// to another attempt of the request waiting here: this caller
		// holds nothing, as when a wait runs out.
		return state.Result{Err: &fence.BusyError{Name: waitName(cmd), Waited: true}, Events: res.Events}, nil
	case <-deposed:
		select {
		case ev := <-ch: // it came just now
			return state.Result{Lease: ev.Lease, Err: ev.Err, Events: res.Events}, nil
		case <-n.closing: // Close ends the office too: answer as Close does
			return state.Result{}, ErrClosed
		default:
		}
		return state.Result{}, n.unknown(errors.New("queued when this node left office: retry with the same request_id at the new leader"))
	case <-n.closing:
		return state.Result{}, ErrClosed
	case <-n.fail.Down():
		// Queued, and the node stopped: after a restart the request is
		// an orphan unless its client retries (package doc, Orphans).
		return state.Result{}, n.unknown(errors.New("queued when the node failed"))
	}
}

// endAttempt ends one attempt (waiting on ch, applied as attempt) of a
// queued acquire whose caller went away or whose wait ran past its bound.
// While another attempt of the same request_id still waits on this node,
// the queue entry is its: nothing is proposed. The last attempt to end
// withdraws it naming the highest attempt this node has seen for it, so
// the entry is not left queued for nobody. A retry applied meanwhile (a
// newer attempt) still makes that cancel a no-op.
func (n *Node) endAttempt(name, requestID string, ch chan state.Event, attempt uint32) error {
	last, highest := n.wait.leave(requestID, ch, attempt)
	if !last {
		return nil
	}
	return n.abandonWait(name, requestID, highest)
}

// abandonWait withdraws attempt of a queued acquire whose caller went away
// (or whose wait ran past its bound). If the grant won the race, the
// machine's OpCancelWait releases that lease (and hands the lock on), so no
// lock is left with a client that went away. If a retry of the request made
// a newer attempt, the cancel is a no-op: the retry owns the wait.
func (n *Node) abandonWait(name, requestID string, attempt uint32) error {
	ctx, cancel := context.WithTimeout(context.Background(), cancelWaitTimeout)
	defer cancel()
	_, err := n.propose(ctx, &state.Command{Op: state.OpCancelWait, Name: name, RequestID: requestID, Attempt: attempt})
	if err != nil {
		n.cfg.Logger.Warn("cancel of abandoned wait failed", "name", name, "request_id", requestID, "attempt", attempt, "err", err)
	}
	return err
}
