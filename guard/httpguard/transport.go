package httpguard

import (
	"context"
	"net/http"

	"github.com/fenceworks/fence"
)

// TokenSource is what Transport needs of a lease; *client.Lease satisfies it.
// A TokenSource that is also a SignedTokenSource sends its signed token.
type TokenSource interface {
	Token() fence.Token
}

// SignedTokenSource is a lease that hands out its token with the proof of
// its grant (*client.Lease's SignedToken). Transport sends its text form in
// Fence-Token, for a server whose middleware has a key set.
type SignedTokenSource interface {
	SignedToken() fence.SignedToken
}

// Transport is an http.RoundTripper that adds Fence-Token (from Lease, read
// at each request: its SignedToken's text form when Lease is a
// SignedTokenSource, else the bare Token) and Fence-Resource to every request it sends, and
// Fence-Op-Id when the request's context carries one (WithOpID). It does not
// modify the caller's request.
type Transport struct {
	Base     http.RoundTripper // nil: http.DefaultTransport
	Lease    TokenSource
	Resource string
}

// RoundTrip implements http.RoundTripper. A lease without a valid token or
// an invalid resource is refused with a *fence.InvalidError before sending.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	closeBody := func() {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper must close the body, even on error
		}
	}
	if t.Lease == nil {
		closeBody()
		return nil, fence.Invalid("lease", "set", "nil")
	}
	var st fence.SignedToken
	if s, ok := t.Lease.(SignedTokenSource); ok {
		st = s.SignedToken()
	} else {
		st = fence.SignedToken{Token: t.Lease.Token()}
	}
	if err := fence.ValidateToken(st.Token); err != nil {
		closeBody()
		return nil, err
	}
	if err := fence.ValidateName("resource", t.Resource); err != nil {
		closeBody()
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set(HeaderToken, st.String())
	out.Header.Set(HeaderResource, t.Resource)
	if id, ok := req.Context().Value(opIDKey{}).(string); ok && id != "" {
		out.Header.Set(HeaderOpID, id)
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(out)
}

type opIDKey struct{}

// WithOpID returns a context whose requests, sent through Transport, carry
// the idempotency key id in Fence-Op-Id. Reuse the same id when retrying the
// same operation.
func WithOpID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opIDKey{}, id)
}
