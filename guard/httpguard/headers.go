package httpguard

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fenceworks/fence"
)

// The header names.
const (
	HeaderToken    = "Fence-Token"
	HeaderResource = "Fence-Resource"
	HeaderOpID     = "Fence-Op-Id"
)

// Fenced is what the middleware read from a request and accepted.
type Fenced struct {
	Resource string
	Token    fence.Token
	// SignedToken is Fence-Token as sent: the token with its proof (or
	// without one, for a bare decimal token). With a key set the middleware
	// accepted the request only after the proof held.
	SignedToken fence.SignedToken
	OpID        string // "" when the request had none
	Tx          Tx     // the open guard transaction; the handler writes in it
}

// parseHeaders reads and validates the fencing headers. Errors are
// *fence.InvalidError naming the header.
// When resourceOf is set, it names the resource and the header, if sent,
// must match it.
func parseHeaders(h http.Header, resourceOf func(*http.Request) string, r *http.Request) (Fenced, error) {
	var f Fenced
	tok, err := single(h, HeaderToken, true)
	if err != nil {
		return f, err
	}
	if strings.Contains(tok, ".") {
		// The text form of a signed token: <token>.<cluster>.<key>.<sig>.
		if f.SignedToken, err = fence.ParseSignedToken(tok); err != nil {
			return f, renamed(err, HeaderToken)
		}
		f.Token = f.SignedToken.Token
	} else {
		n, err := strconv.ParseUint(tok, 10, 64)
		if err != nil || tok[0] == '+' {
			return f, fence.Invalid(HeaderToken, "a decimal integer, or a signed token <token>.<cluster id>.<key id>.<signature>", quote(tok))
		}
		f.Token = fence.Token(n)
		f.SignedToken = fence.SignedToken{Token: f.Token}
	}
	if err := fence.ValidateToken(f.Token); err != nil {
		return f, renamed(err, HeaderToken)
	}
	if f.Resource, err = single(h, HeaderResource, resourceOf == nil); err != nil {
		return f, err
	}
	if resourceOf != nil {
		want := resourceOf(r)
		if f.Resource != "" && f.Resource != want {
			return f, fence.Invalid(HeaderResource, "the resource this endpoint writes, "+quote(want), quote(f.Resource))
		}
		f.Resource = want
	}
	if err := fence.ValidateName(HeaderResource, f.Resource); err != nil {
		return f, err
	}
	if f.OpID, err = single(h, HeaderOpID, false); err != nil {
		return f, err
	}
	if err := fence.ValidateID(HeaderOpID, f.OpID); err != nil {
		return f, err
	}
	return f, nil
}

// single returns the one value of header name.
func single(h http.Header, name string, required bool) (string, error) {
	switch v := h.Values(name); {
	case len(v) > 1:
		return "", fence.Invalid(name, "sent once", fmt.Sprintf("(%d values)", len(v)))
	case len(v) == 1 && v[0] != "":
		return v[0], nil
	case required:
		return "", fence.Invalid(name, "present", "")
	}
	return "", nil
}

func renamed(err error, field string) error {
	if inv, ok := err.(*fence.InvalidError); ok {
		c := *inv
		c.Field = field
		return &c
	}
	return err
}

func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}
