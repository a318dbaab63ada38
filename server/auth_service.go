package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// authService is the AuthService over Deps.Auth (unimplemented without
// it). The node that receives a bootstrap or a token create draws the
// secret (256 bits from crypto/rand) and proposes only its SHA-256: the
// state never makes randomness, and the secret is in no log, snapshot or
// backup. It is returned once.
type authService struct{ s *Server }

func (s *Server) authRoute(opts []connect.HandlerOption) route {
	var svc fencev1connect.AuthServiceHandler = fencev1connect.UnimplementedAuthServiceHandler{}
	if s.deps.Auth != nil {
		svc = authService{s}
	}
	path, h := fencev1connect.NewAuthServiceHandler(svc, opts...)
	return route{prefix: path, h: h}
}

func (s *Server) authCalls() fencev1connect.AuthServiceHandler {
	if s.deps.Auth == nil {
		return fencev1connect.UnimplementedAuthServiceHandler{}
	}
	return authService{s}
}

// newSecret draws a token id (64 bits, hex) and its secret
// fence_<id>_<256 bits, base64url>, and the secret's SHA-256.
func newSecret() (id, secret string, hash []byte, err error) {
	var idb [8]byte
	var sec [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", "", nil, err
	}
	if _, err := rand.Read(sec[:]); err != nil {
		return "", "", nil, err
	}
	id = hex.EncodeToString(idb[:])
	secret = TokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(sec[:])
	sum := sha256.Sum256([]byte(secret))
	return id, secret, sum[:], nil
}

// admin authenticates an AuthService call: once the store is bootstrapped
// it needs an admin token, whether or not checking is on.
func (a authService) admin(ctx context.Context, method string) (context.Context, fence.Principal, error) {
	id, err := a.s.identify(ctx, true)
	if err != nil {
		a.s.audit(ctx, method, "", "", err)
		return ctx, fence.Principal{}, a.s.connectError(ctx, method, err)
	}
	if !id.Admin && !id.trusted {
		err := &fence.PermissionDeniedError{Principal: id.Name, What: "admin"}
		a.s.audit(ctx, method, id.Name, "", err)
		return ctx, fence.Principal{}, a.s.connectError(ctx, method, err)
	}
	return fence.WithPrincipal(ctx, id.Principal), id.Principal, nil
}

// apply proposes cmd as p.
func (a authService) apply(ctx context.Context, method string, p fence.Principal, cmd state.Command) error {
	cmd.Principal, cmd.Admin = p.Name, p.Admin
	res, err := a.s.deps.Auth.ApplyAuth(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if errors.Is(err, fence.ErrPermissionDenied) {
			a.s.audit(ctx, method, p.Name, cmd.Name, err)
		}
		return a.s.connectError(ctx, method, err)
	}
	a.s.auditAction(ctx, method, p.Name, cmd.Name)
	return nil
}

func tokenInfo(t state.AuthToken) *fencev1.AuthTokenInfo {
	out := &fencev1.AuthTokenInfo{Id: t.ID, Roles: t.Roles, Description: t.Description, Revoked: t.Revoked,
		CreatedAt: durationpb.New(durationOf(t.CreatedAt))}
	if t.ExpiresAt != 0 {
		out.ExpiresAt = durationpb.New(durationOf(t.ExpiresAt))
	}
	return out
}

func (a authService) lookup(id string) (t state.AuthToken) {
	a.s.deps.Auth.ReadAuth(func(m *state.Machine) { t, _ = m.AuthToken(id) })
	t.Hash = nil
	return t
}

// Bootstrap needs no credentials: the state refuses it once bootstrapped
// (unless the reset index names the bootstraps so far, as the node's reset
// file does; docs/operations.md).
func (a authService) Bootstrap(ctx context.Context, req *connect.Request[fencev1.AuthBootstrapRequest]) (*connect.Response[fencev1.AuthBootstrapResponse], error) {
	const method = "Bootstrap"
	id, secret, hash, err := newSecret()
	if err != nil {
		return nil, a.s.connectError(ctx, method, err)
	}
	idx := req.Msg.GetResetIndex()
	if idx > 1<<32-1 {
		return nil, a.s.connectError(ctx, method, fence.Invalid("reset_index", "at most 2^32-1", "too large"))
	}
	if idx == 0 && req.Msg.GetResetSecret() != "" {
		return nil, a.s.connectError(ctx, method, fence.Invalid("reset_index", "set with reset_secret (the number in the reset file)", "0"))
	}
	if idx > 0 && req.Msg.GetResetSecret() == "" {
		return nil, a.s.connectError(ctx, method, fence.Invalid("reset_secret", "set with reset_index (the secret in the reset file)", ""))
	}
	if idx > 0 {
		if err := a.s.checkReset(idx, req.Msg.GetResetSecret()); err != nil {
			a.s.audit(ctx, method, "", "", err)
			return nil, a.s.connectError(ctx, method, err)
		}
	}
	cmd := state.Command{Op: state.OpAuthBootstrap, Name: id, Value: hash, Attempt: uint32(idx)}
	if err := a.apply(ctx, method, fence.Principal{}, cmd); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.AuthBootstrapResponse{Token: tokenInfo(a.lookup(id)), Secret: secret}), nil
}

func (a authService) SetEnabled(ctx context.Context, req *connect.Request[fencev1.AuthSetEnabledRequest]) (*connect.Response[fencev1.AuthSetEnabledResponse], error) {
	ctx, p, err := a.admin(ctx, "SetEnabled")
	if err != nil {
		return nil, err
	}
	cmd := state.Command{Op: state.OpAuthEnable}
	if req.Msg.GetEnabled() {
		cmd.Delta = 1
	}
	if err := a.apply(ctx, "SetEnabled", p, cmd); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.AuthSetEnabledResponse{}), nil
}

// Status is open to every caller: it says who the caller is (or why it is
// not authenticated, as an error).
func (a authService) Status(ctx context.Context, req *connect.Request[fencev1.AuthStatusRequest]) (*connect.Response[fencev1.AuthStatusResponse], error) {
	out := &fencev1.AuthStatusResponse{}
	a.s.deps.Auth.ReadAuth(func(m *state.Machine) { out.Enabled, out.Bootstraps = m.AuthEnabled(), m.AuthBootstraps() })
	id, err := a.s.identify(ctx, out.Bootstraps > 0)
	if err != nil {
		a.s.audit(ctx, "Status", "", "", err)
		return nil, a.s.connectError(ctx, "Status", err)
	}
	out.Principal, out.Admin = id.Name, id.Admin
	return connect.NewResponse(out), nil
}

// maxTokenTTL bounds a token's ttl: ten years (server time is
// nanoseconds in an int64; a ttl near its end overflowed into the past).
const maxTokenTTL = 10 * 365 * 24 * time.Hour

func (a authService) CreateToken(ctx context.Context, req *connect.Request[fencev1.CreateTokenRequest]) (*connect.Response[fencev1.CreateTokenResponse], error) {
	const method = "CreateToken"
	ctx, p, err := a.admin(ctx, method)
	if err != nil {
		return nil, err
	}
	if ttl := req.Msg.GetTtl(); ttl != nil && (!ttl.IsValid() || ttl.AsDuration() < 0 || ttl.AsDuration() > maxTokenTTL) {
		// Refused before it is proposed: a TTL that overflowed server time
		// made a token that had expired before it was made.
		return nil, a.s.connectError(ctx, method, fence.Invalid("ttl", "0 (no expiry) to "+maxTokenTTL.String(), ttl.AsDuration().String()))
	}
	id, secret, hash, err := newSecret()
	if err != nil {
		return nil, a.s.connectError(ctx, method, err)
	}
	cmd := state.Command{Op: state.OpTokenCreate, Name: id, Value: hash, Owner: req.Msg.GetDescription(), Roles: req.Msg.GetRoles(),
		TTL: req.Msg.GetTtl().AsDuration()}
	if err := a.apply(ctx, method, p, cmd); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.CreateTokenResponse{Token: tokenInfo(a.lookup(id)), Secret: secret}), nil
}

func (a authService) ListTokens(ctx context.Context, req *connect.Request[fencev1.ListTokensRequest]) (*connect.Response[fencev1.ListTokensResponse], error) {
	ctx, _, err := a.admin(ctx, "ListTokens")
	if err != nil {
		return nil, err
	}
	out := &fencev1.ListTokensResponse{}
	a.s.deps.Auth.ReadAuth(func(m *state.Machine) {
		for _, t := range m.AuthTokens() {
			out.Tokens = append(out.Tokens, tokenInfo(t))
		}
	})
	return connect.NewResponse(out), nil
}

func (a authService) RevokeToken(ctx context.Context, req *connect.Request[fencev1.RevokeTokenRequest]) (*connect.Response[fencev1.RevokeTokenResponse], error) {
	ctx, p, err := a.admin(ctx, "RevokeToken")
	if err != nil {
		return nil, err
	}
	if err := a.apply(ctx, "RevokeToken", p, state.Command{Op: state.OpTokenRevoke, Name: req.Msg.GetId()}); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.RevokeTokenResponse{}), nil
}

func parsePerms(in []string) ([]state.Permission, error) {
	var out []state.Permission
	for _, s := range in {
		p, err := state.ParsePermission(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (a authService) roleChange(ctx context.Context, method string, op state.Op, role string, perms []string) error {
	ctx, p, err := a.admin(ctx, method)
	if err != nil {
		return err
	}
	ps, err := parsePerms(perms)
	if err != nil {
		return a.s.connectError(ctx, method, err)
	}
	return a.apply(ctx, method, p, state.Command{Op: op, Name: role, Perms: ps})
}

func (a authService) GrantRole(ctx context.Context, req *connect.Request[fencev1.GrantRoleRequest]) (*connect.Response[fencev1.GrantRoleResponse], error) {
	if err := a.roleChange(ctx, "GrantRole", state.OpRoleGrant, req.Msg.GetRole(), req.Msg.GetPermissions()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.GrantRoleResponse{}), nil
}

func (a authService) RevokeRole(ctx context.Context, req *connect.Request[fencev1.RevokeRoleRequest]) (*connect.Response[fencev1.RevokeRoleResponse], error) {
	if err := a.roleChange(ctx, "RevokeRole", state.OpRoleRevoke, req.Msg.GetRole(), req.Msg.GetPermissions()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.RevokeRoleResponse{}), nil
}

func (a authService) ListRoles(ctx context.Context, req *connect.Request[fencev1.ListRolesRequest]) (*connect.Response[fencev1.ListRolesResponse], error) {
	if _, _, err := a.admin(ctx, "ListRoles"); err != nil {
		return nil, err
	}
	out := &fencev1.ListRolesResponse{}
	a.s.deps.Auth.ReadAuth(func(m *state.Machine) {
		for _, r := range m.Roles() {
			ri := &fencev1.RoleInfo{Name: r.Name, CertNames: r.Certs, Quota: roleQuotaProto(r.Quota)}
			for _, p := range r.Perms {
				ri.Permissions = append(ri.Permissions, p.String())
			}
			out.Roles = append(out.Roles, ri)
		}
	})
	return connect.NewResponse(out), nil
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

func (a authService) BindRole(ctx context.Context, req *connect.Request[fencev1.BindRoleRequest]) (*connect.Response[fencev1.BindRoleResponse], error) {
	ctx, p, err := a.admin(ctx, "BindRole")
	if err != nil {
		return nil, err
	}
	cmd := state.Command{Op: state.OpRoleBind, Name: req.Msg.GetRole(), Owner: req.Msg.GetCertName()}
	if !req.Msg.GetUnbind() {
		cmd.Delta = 1
	}
	if err := a.apply(ctx, "BindRole", p, cmd); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.BindRoleResponse{}), nil
}

func (a authService) SetRoleQuota(ctx context.Context, req *connect.Request[fencev1.SetRoleQuotaRequest]) (*connect.Response[fencev1.SetRoleQuotaResponse], error) {
	ctx, p, err := a.admin(ctx, "SetRoleQuota")
	if err != nil {
		return nil, err
	}
	q := req.Msg.GetQuota()
	cmd := state.Command{Op: state.OpRoleQuota, Name: req.Msg.GetRole(),
		Quota: state.Quota{Sessions: int(q.GetSessions()), Waiters: int(q.GetWaiters()), IDs: int(q.GetIds()), Conns: int(q.GetConns()), Streams: int(q.GetStreams()), Locks: int(q.GetLocks())}}
	if err := a.apply(ctx, "SetRoleQuota", p, cmd); err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.SetRoleQuotaResponse{}), nil
}

// roleQuotaProto is q as the API's RoleQuota, nil when it sets none.
func roleQuotaProto(q state.Quota) *fencev1.RoleQuota {
	if q == (state.Quota{}) {
		return nil
	}
	return &fencev1.RoleQuota{Sessions: uint32(q.Sessions), Waiters: uint32(q.Waiters), Ids: uint32(q.IDs), Conns: uint32(q.Conns), Streams: uint32(q.Streams), Locks: uint32(q.Locks)}
}
