package nodeview

import (
	"context"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/state"
)

// Watches are node.Watch as the server serves them (server.WatchSource):
// the events in the API's messages.
type Watches struct{ N *node.Node }

// Watch starts a watch of req on the node's applied state.
func (v Watches) Watch(ctx context.Context, req *fencev1.WatchRequest) (*Watch, error) {
	r := node.WatchRequest{Prefix: req.GetPrefix(), Name: req.GetName()}
	if a := req.GetAfter(); a != "" {
		p, err := node.ParseWatchPos(a)
		if err != nil {
			return nil, fence.Invalid("after", "a position a watch event gave: INDEX or INDEX.CMD.CHANGE (decimal)", a)
		}
		r.After = &p
	}
	w, err := v.N.Watch(ctx, r)
	if err != nil {
		return nil, err
	}
	return &Watch{w: w}, nil
}

// Watch is one watch (server.WatchStream).
type Watch struct {
	w      *node.Watch
	buf    []node.WatchEvent
	shares []*node.WatchShare // of the events the last Next returned
}

// Next returns the next events as API messages.
func (w *Watch) Next(ctx context.Context) ([]*fencev1.WatchEvent, error) {
	var err error
	w.buf, err = w.w.Next(ctx, w.buf)
	out := make([]*fencev1.WatchEvent, 0, len(w.buf))
	w.shares = w.shares[:0]
	for i := range w.buf {
		out = append(out, WatchEventPB(&w.buf[i]))
		w.shares = append(w.shares, w.buf[i].Share)
	}
	clear(w.buf)
	return out, err
}

// Shared returns what the watches of the i-th event the last Next
// returned share (server.SharedWatchStream); nil when it is not shared
// (a state's page, or a change no watch covered when it was applied).
func (w *Watch) Shared(i int) interface {
	Load(slot int) []byte
	Store(slot int, b []byte)
} {
	if i < 0 || i >= len(w.shares) || w.shares[i] == nil {
		return nil
	}
	return w.shares[i]
}

// Close ends the watch.
func (w *Watch) Close() { w.w.Close() }

// WatchEventPB is e as the API's message.
func WatchEventPB(e *node.WatchEvent) *fencev1.WatchEvent {
	out := &fencev1.WatchEvent{Position: e.Pos.String(), Index: e.Pos.Index}
	if e.State != nil {
		st := &fencev1.WatchState{HistoryGone: e.State.HistoryGone, Page: e.State.Page, More: e.State.More, Locks: make([]*fencev1.WatchLock, 0, len(e.State.Locks))}
		for _, li := range e.State.Locks {
			st.Locks = append(st.Locks, watchLockPB(li))
		}
		out.Event = &fencev1.WatchEvent_State{State: st}
		return out
	}
	c := &e.Change
	ch := &fencev1.LockChange{Kind: c.Kind.String(), Name: c.Name, Token: uint64(c.Token), Owner: c.Owner, Principal: c.Principal,
		Mode: c.Mode.String(), Permits: c.Permits, Session: c.Session, RequestId: c.RequestID,
		Holders: uint32(c.Holders), Waiters: uint32(c.Waiters), Version: c.Version, LastAccepted: uint64(c.LastAccepted)}
	if c.Kind == state.ChangeWritten || c.Kind == state.ChangeRefused {
		ch.Mode = "" // a resource has no mode
	}
	if c.TTL > 0 {
		ch.Ttl = durationpb.New(c.TTL)
	}
	out.Event = &fencev1.WatchEvent_Change{Change: ch}
	return out
}

// watchLockPB is one lock of a watch's state: every lease holding it, in
// grant order.
func watchLockPB(li state.LockInfo) *fencev1.WatchLock {
	l := &fencev1.WatchLock{Name: li.Name, Waiters: uint32(li.Waiters)}
	holders := li.Holders
	if len(holders) == 0 && li.Lease != nil {
		holders = []fence.Lease{*li.Lease}
	}
	for _, h := range holders {
		l.Holders = append(l.Holders, &fencev1.WatchHolder{Token: uint64(h.Token), Owner: h.Owner,
			Mode: h.Mode.String(), Remaining: durationpb.New(h.Remaining)})
	}
	return l
}
