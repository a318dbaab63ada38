package httpguard

import (
	"context"
	"net/http"

	"github.com/fenceworks/fence"
)

// TokenSource is what Transport needs of a lease; *client.Lease satisfies it.
type TokenSource interface {
	Token() fence.Token
}

// Transport is an http.RoundTripper that adds Fence-Token (from Lease, read
// at each request) and Fence-Resource to every request it sends, and
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
	tok := t.Lease.Token()
	if err := fence.ValidateToken(tok); err != nil {
		closeBody()
		return nil, err
	}
	if err := fence.ValidateName("resource", t.Resource); err != nil {
		closeBody()
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set(HeaderToken, tok.String())
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
