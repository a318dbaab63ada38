package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// keyService is the KeyService over Deps.Auth (unimplemented without it):
// the signing keys of signed grants (state/keys.go). RotateKey draws the
// new key's seed here (crypto/rand: the state never makes randomness) and
// proposes it; RotateKey and RetireKey need an admin (as every AuthService
// change) and are audited. ListKeys, like GET /v1/keys, shows no secret
// and needs no permission.
type keyService struct{ s *Server }

func (s *Server) keyRoute(opts []connect.HandlerOption) route {
	path, h := fencev1connect.NewKeyServiceHandler(s.keyCalls(), opts...)
	return route{prefix: path, h: h}
}

func (s *Server) keyCalls() fencev1connect.KeyServiceHandler {
	if s.deps.Auth == nil {
		return fencev1connect.UnimplementedKeyServiceHandler{}
	}
	return keyService{s}
}

func (k keyService) ListKeys(ctx context.Context, req *connect.Request[fencev1.ListKeysRequest]) (*connect.Response[fencev1.ListKeysResponse], error) {
	// Not from a node that has not caught up (see keys).
	if err := k.s.keySetServable(); err != nil {
		return nil, connect.NewError(connect.CodeUnavailable, err)
	}
	out := &fencev1.ListKeysResponse{}
	k.s.deps.Auth.ReadAuth(func(m *state.Machine) {
		out.ClusterId, out.RestoredFrom = m.ClusterID(), m.RestoredFrom()
		for _, ki := range m.SigningKeys() {
			out.Keys = append(out.Keys, &fencev1.SigningKeyInfo{Id: ki.ID, PublicKey: base64.RawURLEncoding.EncodeToString(ki.Public),
				Status: ki.Status.String(), AddedAt: durationpb.New(durationOf(ki.AddedAt)), Leases: uint64(max(ki.Leases, 0)),
				PublicOnly: ki.PublicOnly})
		}
	})
	return connect.NewResponse(out), nil
}

func (k keyService) RotateKey(ctx context.Context, req *connect.Request[fencev1.RotateKeyRequest]) (*connect.Response[fencev1.RotateKeyResponse], error) {
	const method = "RotateKey"
	ctx, p, err := authService(k).admin(ctx, method)
	if err != nil {
		return nil, err
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, k.s.connectError(ctx, method, err)
	}
	res, err := k.apply(ctx, method, p, state.Command{Op: state.OpKeyRotate, Value: seed})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.RotateKeyResponse{KeyId: res.KeyID}), nil
}

func (k keyService) RetireKey(ctx context.Context, req *connect.Request[fencev1.RetireKeyRequest]) (*connect.Response[fencev1.RetireKeyResponse], error) {
	const method = "RetireKey"
	ctx, p, err := authService(k).admin(ctx, method)
	if err != nil {
		return nil, err
	}
	cmd := state.Command{Op: state.OpKeyRetire, Name: req.Msg.GetKeyId()}
	if req.Msg.GetForce() {
		cmd.Delta = 1 // --now: dropped at once, its leases moved to the signing key
	}
	res, err := k.apply(ctx, method, p, cmd)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&fencev1.RetireKeyResponse{LeasesMoved: uint64(max(res.KeyLeases, 0))}), nil
}

// apply proposes a key command as p and audits it (the key's id, never the
// seed; a forced retire says so and how many leases it moved).
func (k keyService) apply(ctx context.Context, method string, p fence.Principal, cmd state.Command) (state.Result, error) {
	cmd.Principal, cmd.Admin = p.Name, p.Admin
	res, err := k.s.deps.Auth.ApplyAuth(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		if errors.Is(err, fence.ErrPermissionDenied) {
			k.s.audit(ctx, method, p.Name, cmd.Name, err)
		}
		return state.Result{}, k.s.connectError(ctx, method, err)
	}
	attrs := []slog.Attr{slog.String("key_id", res.KeyID)}
	if cmd.Op == state.OpKeyRetire && cmd.Delta != 0 {
		attrs = append(attrs, slog.Bool("now", true), slog.Int("leases_moved", res.KeyLeases))
	}
	k.s.auditAction(ctx, method, p.Name, res.KeyID, attrs...)
	return res, nil
}

// keys serves GET /v1/keys: the public key set (fence.KeySet's JSON Web
// Key Set), read from this node's replica, without credentials — like a
// JWKS it holds no secret (docs/security.md).
func (s *Server) keys(w http.ResponseWriter, _ *http.Request) {
	if s.deps.Auth == nil {
		http.NotFound(w, nil)
		return
	}
	// A node that has not caught up since it started would publish the
	// key set of its last snapshot — one a key retired --now since (a
	// leak) may still be in: a guard reloading it would trust that key
	// again (outside attack). And a set with no key verifies nothing.
	if err := s.keySetServable(); err != nil {
		http.Error(w, "the key set is not served by this node now: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	var ks *fence.KeySet
	s.deps.Auth.ReadAuth(func(m *state.Machine) { ks = m.KeySet() })
	if len(ks.Keys) == 0 {
		http.Error(w, "the key set is not served by this node yet: it holds no signing key (its first leader has not proposed one)", http.StatusServiceUnavailable)
		return
	}
	b, err := json.Marshal(ks)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(append(b, '\n'))
}

// keySetServable is nil when this node may publish its key set: caught up
// since it started, and ready now (/readyz: it knows a leader and has
// applied what it knows committed). A node cut off from its cluster — a
// removed member, a paused one — holds a key set that may still list a key
// retired --now since (outside attack: a removed member served one
// indefinitely).
func (s *Server) keySetServable() error {
	if err := s.deps.Auth.CaughtUp(); err != nil {
		return err
	}
	if ready, detail := s.deps.Node.Readiness(); !ready {
		return fmt.Errorf("%w: not ready (%s)", fence.ErrUnavailable, detail)
	}
	return nil
}
