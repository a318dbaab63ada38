package server

import (
	"net/http"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
)

// peerGate refuses every call through the peer port from a node that is
// not admitted now (Deps.PeerAdmitted): a peer's call is trusted — the
// principal it forwards, an admin's rights — so it must come from a member
// of the configuration at the moment it is served, not only when its
// connection was accepted. An outside test kept a connection of a spare
// certificate of the peer CA, accepted as a node started, and was served
// as an admin through it; a removed member's open connection is the same
// door. The refusal is audited with the certificate's node id.
func (s *Server) peerGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if s.deps.PeerAdmitted != nil && clusterapi.FromPeer(ctx) {
			if id := clusterapi.PeerNodeFrom(ctx); id != "" && !s.deps.PeerAdmitted(id) {
				// What: "peer" — the permission a member has, and a node
				// that is not one lacks.
				err := &fence.PermissionDeniedError{Principal: "node:" + id, What: "peer"}
				s.audit(ctx, r.URL.Path, err.Principal, "", err)
				refuse(w, r, apierr.ToConnect(err))
				return
			}
		}
		// A node that has not caught up since it started may hold a
		// configuration that still lists a member removed while it was
		// down (an outside test was served as a removed member for
		// seconds after a restart), and an auth state without the
		// cluster's latest: through its peer port it answers only its
		// own status (what the leader adding it, and Members, ask).
		if clusterapi.FromPeer(ctx) && s.deps.Auth != nil && r.URL.Path != fencev1connect.ClusterServiceNodeStatusProcedure {
			if err := s.deps.Auth.CaughtUp(); err != nil {
				refuse(w, r, connect.NewError(connect.CodeUnavailable, err))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
