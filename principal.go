package fence

import "context"

// Principal is who makes a request, as the server authenticated it: Name
// is the principal's name ("token:<id>" for a bearer token, "cert:<CN or
// URI>" for a client certificate, "" when authentication is off or for an
// anonymous caller) and Admin whether its roles grant admin. The server
// sets it from the credentials it verified, never from a field of the
// request; a node records Name with every lease and session it grants, and
// refuses a renew, release or session call by another principal unless
// Admin.
type Principal struct {
	Name  string
	Admin bool
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p (the server's authenticated caller).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom is the Principal ctx carries; ok is false when none was
// set. A caller without one (an embedded node, a test) acts as an admin
// with no name: what every call was before authentication existed.
func PrincipalFrom(ctx context.Context) (p Principal, ok bool) {
	p, ok = ctx.Value(principalKey{}).(Principal)
	return p, ok
}
