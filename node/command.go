package node

import (
	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/state"
)

// The fence requests as the state.Commands the node proposes: the one
// place a request's values become a command's. A command carries the
// request's fields under the same names, bound to the request's session
// (Session, Seq, Ack).

func bind(cmd state.Command, ref fence.SessionRef) state.Command {
	cmd.Session, cmd.Seq, cmd.Ack = ref.ID, ref.Seq, ref.Ack
	return cmd
}

// acquireCommand is an acquire's command. A session acquire with a seq and
// no request_id gets the id the machine gives it (state.SessionRequestID):
// its waiter is registered under it, so a retry of the seq (maybe on
// another stream while this one still waits) is answered where it waits.
//
// A set (Locks) is proposed as the request lists it (the machine holds it
// sorted); a set of one lock is that lock, proposed in the single form
// (Name, Mode, Permits), so one lock has one form in the log.
func acquireCommand(req fence.AcquireRequest) state.Command {
	name, mode, permits, locks := req.Name, req.Mode, req.Permits, req.Locks
	if len(locks) == 1 {
		name, mode, permits, locks = locks[0].Name, locks[0].Mode, locks[0].Permits, nil
	}
	cmd := bind(state.Command{
		Op: state.OpAcquire, Name: name, Mode: mode, Permits: permits, Locks: append([]fence.LockSpec(nil), locks...),
		Owner: req.Owner, TTL: req.TTL, Wait: req.Wait,
		LockDelay: req.LockDelay, RequestID: req.RequestID,
	}, req.Session)
	if cmd.RequestID == "" && cmd.Session != 0 && cmd.Seq != 0 {
		cmd.RequestID = state.SessionRequestID(cmd.Session, cmd.Seq)
	}
	return cmd
}

func renewCommand(req fence.RenewRequest) state.Command {
	return bind(state.Command{Op: state.OpRenew, Name: req.Name, Token: req.Token, TTL: req.TTL}, req.Session)
}

func releaseCommand(req fence.ReleaseRequest) state.Command {
	return bind(state.Command{Op: state.OpRelease, Name: req.Name, Token: req.Token}, req.Session)
}

func writeCommand(req fence.WriteRequest) state.Command {
	return bind(state.Command{Op: state.OpWrite, Name: req.Resource, Token: req.Token, Value: req.Value, OpID: req.OpID}, req.Session)
}

func addCommand(req fence.AddRequest) state.Command {
	return bind(state.Command{Op: state.OpAdd, Name: req.Resource, Token: req.Token, Delta: req.Delta, OpID: req.OpID}, req.Session)
}

func deleteCommand(req fence.DeleteRequest) state.Command {
	return bind(state.Command{Op: state.OpDelete, Name: req.Resource, Token: req.Token, OpID: req.OpID}, req.Session)
}

func openCommand(req fence.OpenSessionRequest) state.Command {
	return state.Command{Op: state.OpSessionOpen, TTL: req.TTL, RequestID: req.RequestID}
}

// keepAliveCommand binds a keepalive to the session it names (ID, or
// Session.ID), with its session ref's seq and ack.
func keepAliveCommand(req fence.KeepAliveRequest) state.Command {
	cmd := bind(state.Command{Op: state.OpSessionKeepAlive, TTL: req.TTL}, req.Session)
	cmd.Session = req.SessionID()
	return cmd
}

func closeCommand(req fence.CloseSessionRequest) state.Command {
	cmd := bind(state.Command{Op: state.OpSessionClose}, req.Session)
	cmd.Session = req.SessionID()
	return cmd
}
