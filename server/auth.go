package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"net/http"
	"strings"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/state"
)

// Authentication and permissions (docs/security.md).
//
// withCredentials puts what a request presents in its context: the bearer
// secret of "Authorization: Bearer ...", and, on the peer port only, the
// principal a forwarding node authenticated (clusterapi.PrincipalHeader).
// Nothing is refused there: each call is judged where it is served
// (identify, then authorize), so a refusal is the protocol's own error
// with its typed detail on every path (Connect, gRPC, gRPC-Web, plain
// JSON, the session stream).
//
// Auth state is read from the node's own replica (Deps.Auth.ReadAuth), so a
// revoked token is refused by a node as soon as it has applied the
// revocation. With no Deps.Auth, or with checking off (the default),
// every call is served as before authentication existed: as an admin with
// no name, so leases and sessions carry no principal.

// AuthStore is the auth state behind the server.
type AuthStore interface {
	// ReadAuth runs f on the local replica's machine under its read lock;
	// f must not keep m.
	ReadAuth(f func(m *state.Machine))
	// ApplyAuth proposes an auth command (the caller's principal and
	// admin already set in it). A follower answers Errors.NotLeader.
	ApplyAuth(ctx context.Context, cmd state.Command) (state.Result, error)
	// AuthEnabled is the replica's enabled flag, read without the state's
	// lock: with checking off (the default) a call takes no lock to be
	// authenticated.
	AuthEnabled() bool
	// CaughtUp is nil once the node has applied what its cluster had
	// committed when it started (cluster.Membership.Behind), else why not
	// (an error matching fence.ErrUnavailable): until then its replica may
	// not know the auth state, and no call is served.
	CaughtUp() error
}

// statusViewKey marks a call of a node's status or membership view, which
// a node that has not caught up still serves (judged by its replica as it
// is: they hold no values and no secrets). Members then asks no other
// member (cluster.Membership.Members): a stale replica would hand an
// anonymous caller the leader's status.
type statusViewKey struct{}

// TokenPrefix starts every bearer secret: fence_<id>_<base64url secret>.
const TokenPrefix = "fence_"

// credentials are what a request presented.
type credentials struct {
	header    bool   // an Authorization header was sent
	bearer    string // its bearer secret ("" none or not Bearer)
	malformed string // why the Authorization header(s) cannot be read, if so
	certNames []string
	peer      *fence.Principal // forwarded by a peer node (peer port only)
}

type credentialsKey struct{}

func credsOf(ctx context.Context) credentials {
	c, _ := ctx.Value(credentialsKey{}).(credentials)
	return c
}

func (s *Server) withCredentials(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c credentials
		if a := r.Header.Get("Authorization"); a != "" {
			c.header = true
			if scheme, secret, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
				c.bearer = strings.TrimSpace(secret)
			}
		}
		c.malformed = authHeaderProblem(r.Header.Values("Authorization"), c.bearer)
		if c.malformed != "" {
			c.header, c.bearer = true, "" // judged by none of them
		}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
			c.certNames = certNames(r.TLS.PeerCertificates[0])
		}
		if clusterapi.FromPeer(r.Context()) {
			if p, ok := r.Header[clusterapi.PrincipalHeader]; ok {
				c.peer = &fence.Principal{Name: strings.Join(p, ""), Admin: r.Header.Get(clusterapi.AdminHeader) == "1"}
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), credentialsKey{}, c)))
	})
}

// authHeaderProblem says why a request's Authorization headers cannot be
// read ("" when they can): more than one (which one would count depends on
// who reads first: none does), or a bearer secret that is not one word
// (trailing garbage, or several joined by commas).
func authHeaderProblem(values []string, bearer string) string {
	if len(values) > 1 {
		return "more than one Authorization header: send exactly one, Authorization: Bearer <token>"
	}
	if strings.ContainsAny(bearer, " \t,") {
		return "the bearer token is not one word: send Authorization: Bearer fence_<id>_<secret> and nothing after it"
	}
	return ""
}

// certNames are the names a role binding may match: the CN and every URI
// SAN of a verified client certificate.
func certNames(c *x509.Certificate) []string {
	var out []string
	if c.Subject.CommonName != "" {
		out = append(out, c.Subject.CommonName)
	}
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

// identity is an authenticated caller.
type identity struct {
	fence.Principal
	perms   []state.Permission
	trusted bool // forwarded by a peer, or no checking: not judged again
}

// identify authenticates the caller of ctx. With checking off it is an
// anonymous admin, unless force (the AuthService's calls: once
// bootstrapped they need an admin token even before checking is on).
func (s *Server) identify(ctx context.Context, force bool) (identity, error) {
	if !force {
		if id, ok := ctx.Value(identityKey{}).(identity); ok {
			return id, nil // authorize judged this call already
		}
	}
	c := credsOf(ctx)
	// Calls from peers (the leader asking this node's status as it adds
	// it, forwarded calls to a leader) come from members over mutual TLS;
	// a node's own status and membership views are served as /readyz is,
	// so that an operator can see why a node does not catch up. Which
	// call this is is looked up only for a node not caught up: each
	// lookup walks the request context's chain, and every call of a
	// session stream is judged here (docs/benchmarks.md, issue 20's CPU).
	// So CaughtUp is asked first, for those calls too: it reads, and may
	// start the one paced question to the leader WatchCaughtUp asks anyway.
	if s.deps.Auth != nil {
		if err := s.deps.Auth.CaughtUp(); err != nil && !clusterapi.FromPeer(ctx) && ctx.Value(statusViewKey{}) == nil {
			return identity{}, err
		}
	}
	if c.peer != nil {
		// A node whose replica had not yet applied "enable" forwards its
		// callers as anonymous admins: once checking is on here, such a
		// call is not served (the client retries; the forwarding node
		// catches up).
		if c.peer.Name == "" && s.deps.Auth != nil && s.deps.Auth.AuthEnabled() {
			return identity{}, &fence.UnauthenticatedError{Reason: "no credentials (forwarded anonymous by a node that had not yet applied authentication's enable)"}
		}
		return identity{Principal: *c.peer, trusted: true}, nil
	}
	if s.deps.Auth == nil || !force && !s.deps.Auth.AuthEnabled() {
		return identity{Principal: fence.Principal{Admin: true}, trusted: true}, nil
	}
	var (
		enabled    bool
		bootstraps uint64
		tok        state.AuthToken
		found      bool
		now        int64
		perms      []state.Permission
		conns      int // the principal's roles' connection quota (0: the flag's)
	)
	id, ok := parseSecret(c.bearer)
	var certName string // the first of the certificate's names bound to a role
	s.deps.Auth.ReadAuth(func(m *state.Machine) {
		enabled, bootstraps, now = m.AuthEnabled(), m.AuthBootstraps(), m.Now()
		switch {
		case !enabled && !force:
		case ok:
			if tok, found = m.AuthToken(id); found {
				for _, r := range tok.Roles {
					role, _ := m.Role(r)
					perms = append(perms, role.Perms...)
				}
				conns = m.QuotaOf("token:" + id).Conns
			}
		case !c.header:
			for _, name := range c.certNames {
				for _, role := range m.CertRoles(name) {
					if certName == "" {
						certName = name
					}
					perms = append(perms, role.Perms...)
				}
			}
			if certName != "" {
				conns = m.QuotaOf("cert:" + certName).Conns
			}
		}
	})
	if !enabled && (!force || bootstraps == 0) {
		return identity{Principal: fence.Principal{Admin: true}, trusted: true}, nil
	}
	if !c.header && certName != "" {
		if err := s.admitConn(ctx, "cert:"+certName, conns); err != nil {
			return identity{}, err
		}
		return identity{Principal: fence.Principal{Name: "cert:" + certName, Admin: state.Allows(perms, state.PermAdmin, "")}, perms: perms}, nil
	}
	var reason string
	sum := sha256.Sum256([]byte(c.bearer))
	switch {
	case c.malformed != "":
		reason = "malformed credentials (" + c.malformed + ")"
	case !c.header && len(c.certNames) > 0:
		reason = "no credentials (the client certificate's names are bound to no role)"
	case !c.header:
		reason = "no credentials (send Authorization: Bearer <token>)"
	case c.bearer == "" || !ok:
		reason = "malformed credentials (want Authorization: Bearer fence_<id>_<secret>)"
	case !found || !tok.TokenMatches(sum[:]):
		reason = "unknown token"
	case tok.Revoked:
		reason = "revoked token"
	case tok.ExpiresAt != 0 && now >= tok.ExpiresAt:
		reason = "expired token"
	}
	if reason != "" {
		return identity{}, &fence.UnauthenticatedError{Reason: reason}
	}
	// Its connection keeps its slot, counted as this principal's
	// (conn_fair.go).
	if err := s.admitConn(ctx, "token:"+id, conns); err != nil {
		return identity{}, err
	}
	return identity{Principal: fence.Principal{Name: "token:" + id, Admin: state.Allows(perms, state.PermAdmin, "")}, perms: perms}, nil
}

// parseSecret is the token id of fence_<id>_<secret>.
func parseSecret(secret string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(secret, TokenPrefix)
	if !ok {
		return "", false
	}
	id, sec, ok := strings.Cut(rest, "_")
	return id, ok && id != "" && sec != ""
}

// anyName: a permission of the kind on any prefix will do (sessions,
// which name no lock).
const anyName = "\x00any"

// authorize authenticates the caller of ctx and checks that it may do kind
// on name (kind 0: authenticated is enough; anyName: any prefix). It
// returns ctx carrying the principal, for the node to record and check
// ownership with. Every refusal is audited.
func (s *Server) authorize(ctx context.Context, method string, kind state.PermKind, name string) (context.Context, error) {
	ictx := ctx
	// Not OperatorService.ClusterOverview: it hands out every member's
	// id and raft address, and a node that has not caught up may not know
	// that authentication is on (an outside attack read it anonymously in
	// that window): UNAVAILABLE like every other call.
	if method == "NodeStatus" || method == "Members" {
		ictx = context.WithValue(ctx, statusViewKey{}, true)
	}
	id, err := s.identify(ictx, false)
	if err != nil {
		// Audited only if it is an auth refusal: a principal at its
		// connection quota is RESOURCE_EXHAUSTED, counted as that.
		s.auditRefusal(ctx, method, name, err)
		return ctx, err
	}
	if !id.trusted && !id.Admin && kind != 0 && !allows(id.perms, kind, name) {
		shown := name
		if name == anyName {
			shown = ""
		}
		err := &fence.PermissionDeniedError{Principal: id.Name, What: kind.String(), Name: shown}
		s.audit(ctx, method, id.Name, shown, err)
		return ctx, err
	}
	if h, ok := ctx.Value(replyHoldKey{}).(*replyHold); ok && s.deps.Auth != nil && s.deps.Auth.AuthEnabled() {
		// Its large replies count in its principal's share of the
		// reply budget (reply_budget.go); with authentication off every
		// caller is the same anonymous one: no share.
		h.setPrincipal(id.Name)
	}
	return fence.WithPrincipal(context.WithValue(ctx, identityKey{}, id), id.Principal), nil
}

// identityKey keys the identity authorize found, so that a later check of
// the same call (Add's second permission, a write's reply) does not look
// the token up and hash it again.
type identityKey struct{}

func allows(perms []state.Permission, kind state.PermKind, name string) bool {
	if name == anyName {
		for _, p := range perms {
			if p.Kind == kind || p.Kind == state.PermAdmin {
				return true
			}
		}
		return false
	}
	return state.Allows(perms, kind, name)
}

// statusReader authorizes a NodeStatus call: any authenticated caller may
// ask, and full reports whether it is shown the whole status (an admin, a
// peer, or checking off) or only the node's role and readiness. Only an
// admin's call is audited, as requireAdmin audits it.
func (s *Server) statusReader(ctx context.Context) (_ context.Context, full bool, err error) {
	if clusterapi.FromPeer(ctx) {
		return ctx, true, nil
	}
	ctx, err = s.authorize(ctx, "NodeStatus", 0, "")
	if err != nil {
		return ctx, false, err
	}
	p, _ := fence.PrincipalFrom(ctx)
	if !p.Admin {
		return ctx, false, nil
	}
	s.auditAction(ctx, "NodeStatus", p.Name, "")
	return ctx, true, nil
}

// requireAdmin authorizes an admin call (backup, membership, leadership,
// detailed status). A peer's call on the raft port is a node's, trusted.
func (s *Server) requireAdmin(ctx context.Context, method string) (context.Context, error) {
	if clusterapi.FromPeer(ctx) {
		// Audited too (not the status views nodes ask one another all
		// the time): with the principal a follower forwarded, else as the
		// node; the line names the node (peer_node).
		if method != "NodeStatus" && method != "Members" {
			who := "node"
			if p := credsOf(ctx).peer; p != nil && p.Name != "" {
				who = p.Name
			}
			s.auditAction(ctx, method, who, "")
		}
		return ctx, nil
	}
	ctx, err := s.authorize(ctx, method, state.PermAdmin, "")
	if err == nil {
		p, _ := fence.PrincipalFrom(ctx)
		s.auditAction(ctx, method, p.Name, "")
	}
	return ctx, err
}
