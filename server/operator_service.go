package server

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/state"
)

// operatorService is the OperatorService: what the operator page reads
// beyond the lock calls (docs/api.md). Every call is answered by this node
// from its own replica and memory (the story book, the activity ring), and
// shows only what the caller's permissions allow. Reads are not audited
// (the page polls them); refusals are, as every refusal.
type operatorService struct{ s *Server }

func (s *Server) operatorRoute(opts []connect.HandlerOption) route {
	path, h := fencev1connect.NewOperatorServiceHandler(operatorService{s}, opts...)
	return route{prefix: path, h: h}
}

// Bounds of ListSessions.
const (
	defaultSessionsPage = 100
	maxSessionsPage     = 1000
)

// caller authorizes an operator call needing kind on name (kind 0: any
// authenticated caller) and returns the caller's identity.
func (o operatorService) caller(ctx context.Context, method string, kind state.PermKind, name string) (context.Context, identity, error) {
	ctx, err := o.s.authorize(ctx, method, kind, name)
	if err != nil {
		return ctx, identity{}, o.s.connectError(ctx, method, err)
	}
	id, _ := ctx.Value(identityKey{}).(identity)
	return ctx, id, nil
}

// mayRead reports whether id may read name (as a write's reply is judged:
// unlessReadable).
func (id identity) mayRead(name string) bool {
	return id.trusted || id.Admin || allows(id.perms, state.PermRead, name)
}

// seesAll reports whether id sees every principal's sessions.
func (id identity) seesAll() bool { return id.trusted || id.Admin }

func (o operatorService) WhoAmI(ctx context.Context, req *connect.Request[fencev1.WhoAmIRequest]) (*connect.Response[fencev1.WhoAmIResponse], error) {
	_, id, err := o.caller(ctx, "WhoAmI", 0, "")
	if err != nil {
		return nil, err
	}
	out := &fencev1.WhoAmIResponse{Principal: id.Name, Admin: id.Admin, AuthEnabled: o.s.deps.Auth != nil && o.s.deps.Auth.AuthEnabled()}
	byPrefix := map[string]*fencev1.PrefixPermissions{}
	for _, p := range id.perms {
		pp := byPrefix[p.Prefix]
		if pp == nil {
			pp = &fencev1.PrefixPermissions{Prefix: p.Prefix}
			byPrefix[p.Prefix] = pp
			out.Permissions = append(out.Permissions, pp)
		}
		switch p.Kind {
		case state.PermRead:
			pp.Read = true
		case state.PermWrite:
			pp.Write = true
		case state.PermLock:
			pp.Lock = true
		case state.PermAdmin:
			pp.Admin = true
		}
	}
	sort.Slice(out.Permissions, func(i, j int) bool { return out.Permissions[i].Prefix < out.Permissions[j].Prefix })
	return connect.NewResponse(out), nil
}

func (o operatorService) ListSessions(ctx context.Context, req *connect.Request[fencev1.ListSessionsRequest]) (*connect.Response[fencev1.ListSessionsResponse], error) {
	const method = "ListSessions"
	limit := int(req.Msg.GetLimit())
	switch {
	case limit == 0:
		limit = defaultSessionsPage
	case limit > maxSessionsPage:
		return nil, o.s.connectError(ctx, method, fence.Invalid("limit", fmt.Sprintf("0 (%d) to %d", defaultSessionsPage, maxSessionsPage), strconv.Itoa(limit)))
	}
	var after uint64
	if t := req.Msg.GetPageToken(); t != "" {
		v, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return nil, o.s.connectError(ctx, method, fence.Invalid("page_token", "empty or the next_page_token of a previous page", shortValue(t)))
		}
		after = v
	}
	ctx, id, err := o.caller(ctx, method, 0, "")
	if err != nil {
		return nil, err
	}
	if o.s.deps.Auth == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("%s: this server reads no replica", method))
	}
	// A non-admin sees its own sessions only (checking on: it has a name).
	who := ""
	if !id.seesAll() {
		who = id.Name
	}
	var page []state.SessionView
	var more bool
	// At the node's estimate of server time, not the state's: that moves
	// only with commits, and on an idle store a dead client's session
	// would look freshly kept alive.
	if at, ok := o.s.deps.Auth.(ServerTimeReader); ok {
		at.ReadStateAt(func(m *state.Machine, now int64) { page, more = m.SessionsPage(who, after, limit, now) })
	} else {
		o.s.deps.Auth.ReadAuth(func(m *state.Machine) { page, more = m.SessionsPage(who, after, limit, m.Now()) })
	}
	out := &fencev1.ListSessionsResponse{Sessions: make([]*fencev1.OperatorSession, 0, len(page))}
	for _, v := range page {
		out.Sessions = append(out.Sessions, sessionView(v, id))
	}
	if more {
		out.NextPageToken = strconv.FormatUint(page[len(page)-1].ID, 10)
	}
	return connect.NewResponse(out), nil
}

// ServerTimeReader is an AuthStore that also reads its replica at the
// node's estimate of server time now (node.Node.ReadStateAt): the
// leader clock, or on a follower the state's time plus the time since it
// last changed. ListSessions reads so; an AuthStore without it is read at
// the state's time.
type ServerTimeReader interface {
	ReadStateAt(f func(m *state.Machine, now int64))
}

// sessionView is v as id may see it: the leases on names it may not read
// only counted.
func sessionView(v state.SessionView, id identity) *fencev1.OperatorSession {
	out := &fencev1.OperatorSession{SessionId: v.ID, Principal: v.Principal, TtlMs: v.TTL.Milliseconds(),
		SinceKeepaliveMs: v.SinceKeepAlive.Milliseconds(), ExpiresInMs: v.Remaining.Milliseconds()}
	for _, l := range v.Leases {
		if !id.mayRead(l.Name) {
			out.HiddenLeases++
			continue
		}
		out.Leases = append(out.Leases, &fencev1.SessionLease{Name: l.Name, Token: uint64(l.Token), Mode: l.Mode.String(), Owner: l.Owner})
	}
	return out
}

func (o operatorService) LockStory(ctx context.Context, req *connect.Request[fencev1.LockStoryRequest]) (*connect.Response[fencev1.LockStoryResponse], error) {
	const method = "LockStory"
	name := req.Msg.GetName()
	if err := fence.ValidateName("name", name); err != nil {
		return nil, o.s.connectError(ctx, method, err)
	}
	if _, _, err := o.caller(ctx, method, state.PermRead, name); err != nil {
		return nil, err
	}
	events, dropped := o.s.story.read(name)
	out := &fencev1.LockStoryResponse{Truncated: dropped, SinceUnixMs: o.s.story.since}
	for _, e := range events {
		pe := &fencev1.StoryEvent{Kind: e.kind, Token: uint64(e.token), Owner: e.owner, Principal: e.principal,
			RefusedToken: uint64(e.refused), AcceptedToken: uint64(e.accepted), AtUnixMs: e.at, LogIndex: e.index, SessionId: e.session}
		if e.hasMode {
			pe.Mode = e.mode.String()
		}
		out.Events = append(out.Events, pe)
	}
	return connect.NewResponse(out), nil
}

func (o operatorService) Activity(ctx context.Context, req *connect.Request[fencev1.ActivityRequest]) (*connect.Response[fencev1.ActivityResponse], error) {
	if _, _, err := o.caller(ctx, "Activity", 0, ""); err != nil {
		return nil, err
	}
	out := &fencev1.ActivityResponse{StepMs: uint32(activityStep.Milliseconds())}
	for _, p := range o.s.activity.points() {
		ap := &fencev1.ActivityPoint{AtUnixMs: p.at, Grants: p.grants, Acquires: p.acquires, AcquireP50Us: p.p50, AcquireP99Us: p.p99}
		for _, r := range sortedReasons(p.refusals) {
			ap.Refusals = append(ap.Refusals, &fencev1.ReasonCount{Reason: r, Count: p.refusals[r]})
		}
		out.Points = append(out.Points, ap)
	}
	return connect.NewResponse(out), nil
}

func (o operatorService) ClusterOverview(ctx context.Context, req *connect.Request[fencev1.ClusterOverviewRequest]) (*connect.Response[fencev1.ClusterOverviewResponse], error) {
	const method = "ClusterOverview"
	ctx, _, err := o.caller(ctx, method, state.PermAdmin, "")
	if err != nil {
		return nil, err
	}
	if o.s.deps.Cluster == nil {
		ready, detail := o.s.deps.Node.Readiness()
		m := &fencev1.MemberOverview{Voter: true, Leader: ready, Healthy: ready}
		if !ready {
			m.Error = "not ready: " + detail
		}
		return connect.NewResponse(&fencev1.ClusterOverviewResponse{Members: []*fencev1.MemberOverview{m}}), nil
	}
	list, err := o.s.deps.Cluster.Members(ctx)
	if err != nil {
		return nil, clusterService{s: o.s, m: o.s.deps.Cluster}.error(ctx, method, err)
	}
	out := &fencev1.ClusterOverviewResponse{AnsweredBy: list.AnsweredBy}
	for _, mem := range list.Members {
		m := &fencev1.MemberOverview{Id: mem.ID, Address: mem.RaftAddr, Voter: mem.Suffrage == clusterapi.Voter, Leader: mem.Leader, Error: mem.Error}
		if st := mem.Status; st != nil {
			m.Role, m.Term, m.AppliedIndex, m.CommitIndex, m.LastToken = st.Role, st.Term, st.AppliedIndex, st.CommitIndex, st.LastToken
			m.Healthy = st.Ready && mem.Error == ""
			if !st.Ready && m.Error == "" {
				m.Error = "not ready"
			}
		} else if m.Error == "" {
			m.Error = "no status"
		}
		out.Members = append(out.Members, m)
	}
	return connect.NewResponse(out), nil
}

// shortValue is v as a refusal shows it: at most 64 bytes.
func shortValue(v string) string {
	if len(v) > 64 {
		return fmt.Sprintf("(%d bytes)", len(v))
	}
	return v
}
