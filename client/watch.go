package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

// WatchEvent is one event of a watch (Client.Watch): the state of the
// watched locks (State), a change of one of them (Change), or the error
// that ended the watch (Err, the last event).
type WatchEvent struct {
	// Position is where the event stands in the log, the same on every
	// node ("INDEX" for a state, "INDEX.CMD.CHANGE" for a change); Index
	// is the raft log index of its entry.
	Position string
	Index    uint64
	State    *WatchState
	Change   *LockChange
	Err      error
}

// WatchState is the state of the watched locks at a position: the first
// event of a watch, and again when a resume found the history gone.
//
// The server sends a state of more than 256 locks in pages, each read at
// its own position, with the changes of the locks already listed between
// them; Watch puts the pages together into one WatchState (Position: the
// last page's) and gives those changes right after it, in log order. Each
// such change is of a lock after the state showed it, so applying the
// changes that follow a state to it is exact, but their positions may come
// before the state's.
type WatchState struct {
	Locks []WatchLock
	// HistoryGone: the watch resumed (after a reconnect, or WatchAfter)
	// from a position whose changes the node no longer holds; this state
	// replaces them. Changes between the last position received and this
	// state were missed.
	HistoryGone bool
}

// WatchLock is one held or queued lock of a WatchState.
type WatchLock struct {
	Name    string
	Holders []WatchHolder
	Waiters int
}

// WatchHolder is one lease holding a lock of a WatchState.
type WatchHolder struct {
	Token     fence.Token
	Owner     string
	Mode      string
	Remaining time.Duration
}

// LockChange is one change of one lock.
type LockChange struct {
	// Kind is "granted", "released", "expired", "queued" or "left_queue";
	// for a resource of the built-in store, "written" or "refused".
	Kind  string
	Name  string
	Token fence.Token // 0 for queued and left_queue
	Owner string
	// Principal, Session and RequestID are shown to the lease's own
	// principal and to admins ("" and 0 to other readers).
	Principal string
	Mode      string
	Permits   uint32
	Session   uint64
	TTL       time.Duration
	RequestID string
	// Holders and Waiters are the lock's holders and queue length after
	// the change.
	Holders int
	Waiters int
	// Version ("written": the resource's after the write) and
	// LastAccepted ("refused": the newer token the resource accepted)
	// are the built-in store's.
	Version      uint64
	LastAccepted fence.Token
}

// WatchOption changes a watch.
type WatchOption func(*watchConfig)

type watchConfig struct {
	name  bool
	after string
}

// WatchName makes Watch follow the one lock named by its argument instead
// of a prefix.
func WatchName() WatchOption { return func(w *watchConfig) { w.name = true } }

// WatchAfter resumes after position pos (a WatchEvent's Position): the
// watch begins with the changes after it, or with the state and
// HistoryGone when the node no longer holds them.
func WatchAfter(pos string) WatchOption { return func(w *watchConfig) { w.after = pos } }

// Watch follows the locks whose names start with prefix (every lock for
// ""): the channel gives the state first, then every change in log order,
// each once. When the stream breaks (a node restarts or fails over, the
// server cuts a watch that read too slowly) Watch reconnects, to the next
// endpoint if the one it used is unreachable, and resumes after the last
// position received: no change is missed or repeated — unless the node no
// longer holds them, which the next event says (State.HistoryGone). The
// channel is closed when ctx ends, or after an event with Err when the
// watch cannot go on (permission denied, invalid request). Read the
// channel promptly: while it is not read the server's stream is not read
// either, and a watch far enough behind is cut (and resumed).
func (c *Client) Watch(ctx context.Context, prefix string, opts ...WatchOption) (<-chan WatchEvent, error) {
	var cfg watchConfig
	for _, o := range opts {
		o(&cfg)
	}
	req := &fencev1.WatchRequest{Prefix: prefix, After: cfg.after}
	if cfg.name {
		if err := fence.ValidateName("name", prefix); err != nil {
			return nil, err
		}
		req = &fencev1.WatchRequest{Name: prefix, After: cfg.after}
	}
	out := make(chan WatchEvent, 64)
	go c.watchLoop(ctx, req, out)
	return out, nil
}

// watchLoop serves one watch until ctx ends or a refusal ends it.
func (c *Client) watchLoop(ctx context.Context, req *fencev1.WatchRequest, out chan<- WatchEvent) {
	defer close(out)
	pause := 50 * time.Millisecond
	for ctx.Err() == nil {
		ep := c.pick()
		st, err := ep.locks.Watch(ctx, connect.NewRequest(req))
		if err == nil {
			// A state of many locks comes in pages, with the changes of
			// the locks already listed between them (docs/api.md,
			// "Watch"): they are put together into one State, then those
			// changes, once the last page came. A stream broken before
			// resumes from where the last whole state or change left it.
			var whole *WatchEvent
			var between []WatchEvent
			send := func(e WatchEvent) bool {
				select {
				case out <- e:
					return true
				case <-ctx.Done():
					st.Close()
					return false
				}
			}
			for st.Receive() {
				pause = 50 * time.Millisecond
				m := st.Msg()
				e := watchEventFromProto(m)
				if s := m.GetState(); s != nil {
					if whole == nil || s.GetPage() == 0 {
						whole, between = &e, nil
					} else {
						whole.State.Locks = append(whole.State.Locks, e.State.Locks...)
						whole.State.HistoryGone = whole.State.HistoryGone || e.State.HistoryGone
						whole.Position, whole.Index = e.Position, e.Index
					}
					if s.GetMore() {
						continue
					}
					req.After = whole.Position
					if !send(*whole) {
						return
					}
					for _, c := range between {
						if !send(c) {
							return
						}
					}
					whole, between = nil, nil
					continue
				}
				if whole != nil {
					between = append(between, e)
					continue
				}
				req.After = e.Position
				if !send(e) {
					return
				}
			}
			err = st.Err()
			st.Close()
		}
		if ctx.Err() != nil {
			return
		}
		// A refusal of the server (it carries the reason's detail) ends
		// the watch; a broken stream (Connect names a cut envelope
		// invalid_argument, with no detail) is resumed.
		var ce *connect.Error
		refused := errors.As(err, &ce) && len(ce.Details()) > 0
		switch connect.CodeOf(err) {
		case connect.CodeInvalidArgument, connect.CodePermissionDenied, connect.CodeUnauthenticated:
			if refused {
				out <- WatchEvent{Err: fmt.Errorf("fence: watch: %w", err)}
				return
			}
		case connect.CodeUnimplemented:
			out <- WatchEvent{Err: fmt.Errorf("fence: watch: %w", err)}
			return
		case connect.CodeUnavailable, connect.CodeUnknown:
			c.failover(ep)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, 5*time.Second)
	}
}

func watchEventFromProto(m *fencev1.WatchEvent) WatchEvent {
	e := WatchEvent{Position: m.GetPosition(), Index: m.GetIndex()}
	if s := m.GetState(); s != nil {
		ws := &WatchState{HistoryGone: s.GetHistoryGone()}
		for _, l := range s.GetLocks() {
			wl := WatchLock{Name: l.GetName(), Waiters: int(l.GetWaiters())}
			for _, h := range l.GetHolders() {
				wl.Holders = append(wl.Holders, WatchHolder{Token: fence.Token(h.GetToken()), Owner: h.GetOwner(), Mode: h.GetMode(), Remaining: h.GetRemaining().AsDuration()})
			}
			ws.Locks = append(ws.Locks, wl)
		}
		e.State = ws
	}
	if ch := m.GetChange(); ch != nil {
		e.Change = &LockChange{Kind: ch.GetKind(), Name: ch.GetName(), Token: fence.Token(ch.GetToken()), Owner: ch.GetOwner(),
			Principal: ch.GetPrincipal(), Mode: ch.GetMode(), Permits: ch.GetPermits(), Session: ch.GetSession(),
			TTL: ch.GetTtl().AsDuration(), RequestID: ch.GetRequestId(), Holders: int(ch.GetHolders()), Waiters: int(ch.GetWaiters()),
			Version: ch.GetVersion(), LastAccepted: fence.Token(ch.GetLastAccepted())}
	}
	return e
}
