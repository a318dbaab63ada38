package server

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
)

func leaseToProto(l *fence.Lease) *fencev1.Lease {
	if l == nil {
		return nil
	}
	return &fencev1.Lease{
		Name:      l.Name,
		Owner:     l.Owner,
		Token:     uint64(l.Token),
		Ttl:       durationpb.New(l.TTL),
		Remaining: durationpb.New(l.Remaining),
		// Set where the node made it (grants, Get of a held lock): the
		// bare token when it had no key to sign with; absent in List.
		SignedToken: signedText(l.Signed),
		Mode:        fencev1.ModeText(l.Mode),
		Permits:     l.Permits,
		Locks:       fencev1.LockSpecsOf(l.Locks),
		Proofs:      proofsText(l.Proofs),
	}
}

func proofsText(proofs []fence.SignedToken) []string {
	if len(proofs) == 0 {
		return nil
	}
	out := make([]string, len(proofs))
	for i, p := range proofs {
		out[i] = signedText(p)
	}
	return out
}

func signedText(st fence.SignedToken) string {
	if st.Token == 0 {
		return ""
	}
	return st.String()
}

func lockToProto(li fence.LockInfo) *fencev1.LockInfo {
	p := &fencev1.LockInfo{
		Name:      li.Name,
		Lease:     leaseToProto(li.Lease),
		Waiters:   uint32(li.Waiters),
		LastToken: uint64(li.LastToken),
		Permits:   li.Permits,
	}
	for i := range li.Holders {
		p.Holders = append(p.Holders, leaseToProto(&li.Holders[i]))
	}
	if li.LockDelayRemaining > 0 {
		p.LockDelayRemaining = durationpb.New(li.LockDelayRemaining)
	}
	return p
}

func resourceToProto(rs *fence.ResourceState) *fencev1.ResourceState {
	if rs == nil {
		return nil
	}
	return &fencev1.ResourceState{
		Resource:  rs.Resource,
		Value:     rs.Value,
		LastToken: uint64(rs.LastToken),
		Version:   rs.Version,
		Deleted:   rs.Deleted,
	}
}

func sessionToProto(si *fence.SessionInfo) *fencev1.Session {
	if si == nil {
		return nil
	}
	return &fencev1.Session{Id: si.ID, Ttl: durationpb.New(si.TTL), Remaining: durationpb.New(si.Remaining), Leases: uint64(max(si.Leases, 0))}
}

// The wire requests as fence requests: the one place a proto request's
// fields become a fence request's. Each also returns its wire checks
// (validate.go), which the request's Validate judges in their fields'
// places.

func acquireRequest(m *fencev1.AcquireRequest, b binding, max time.Duration) (fence.AcquireRequest, []fence.FieldCheck) {
	t, tc := ttl(m.GetTtl(), max)
	if b.session != 0 && m.GetTtl() != nil {
		tc = sessionTTL(b.session, m.GetTtl())
	}
	wait, wc := duration("wait", m.GetWait())
	delay, dc := duration("lock_delay", m.GetLockDelay())
	mode, mc := mode("mode", m.GetMode())
	locks, lc := lockSpecs(m.GetLocks())
	return fence.AcquireRequest{
		Name: m.GetName(), Mode: mode, Permits: m.GetPermits(), Locks: locks,
		Owner: m.GetOwner(), TTL: t, Wait: wait, LockDelay: delay,
		RequestID: m.GetRequestId(), Session: b.ref(),
	}, wire(tc, wc, dc, mc, lc)
}

// mode reads a mode string; one that is neither "exclusive" nor "shared"
// is judged in mode's place (Exclusive stands in for it).
func mode(field, text string) (fence.Mode, fence.FieldCheck) {
	m, err := fence.ParseMode(text)
	if err != nil {
		return fence.Exclusive, fence.FieldCheck{Field: "mode", Err: fence.Invalid(field, `"exclusive" or "shared"`, strconv.Quote(text))}
	}
	return m, fence.FieldCheck{}
}

// lockSpecs reads a set's locks. A mode that does not parse is judged in
// name's place (where Validate judges a set's locks), in the order
// Validate would judge it: the first lock's name, mode, permits and
// duplicate before the next lock's (a bad mode stands in as Exclusive).
func lockSpecs(ps []*fencev1.LockSpec) ([]fence.LockSpec, fence.FieldCheck) {
	if len(ps) == 0 {
		return nil, fence.FieldCheck{}
	}
	out := make([]fence.LockSpec, len(ps))
	bad := make([]error, len(ps))
	anyBad := false
	for i, p := range ps {
		m, mc := mode("locks["+strconv.Itoa(i)+"].mode", p.GetMode())
		out[i] = fence.LockSpec{Name: p.GetName(), Mode: m, Permits: p.GetPermits()}
		bad[i] = mc.Err
		anyBad = anyBad || mc.Err != nil
	}
	if !anyBad || len(ps) > fence.MaxSetLocks {
		return out, fence.FieldCheck{}
	}
	seen := make(map[string]bool, len(out))
	for i, s := range out {
		field := "locks[" + strconv.Itoa(i) + "]."
		err := fence.ValidateName(field+"name", s.Name)
		if err == nil {
			err = bad[i]
		}
		if err == nil {
			err = fence.ValidateLockSpec(field, s)
		}
		if err == nil && seen[s.Name] {
			err = fence.Invalid(field+"name", "named once in a set", strconv.Quote(s.Name))
		}
		if err != nil {
			return out, fence.FieldCheck{Field: "name", Err: err}
		}
		seen[s.Name] = true
	}
	return out, fence.FieldCheck{}
}

func renewRequest(m *fencev1.RenewRequest, b binding, max time.Duration) (fence.RenewRequest, []fence.FieldCheck) {
	t, tc := ttl(m.GetTtl(), max)
	return fence.RenewRequest{Name: m.GetName(), Token: fence.Token(m.GetToken()), TTL: t, Session: b.ref()}, wire(tc)
}

func releaseRequest(m *fencev1.ReleaseRequest, b binding) (fence.ReleaseRequest, []fence.FieldCheck) {
	return fence.ReleaseRequest{Name: m.GetName(), Token: fence.Token(m.GetToken()), Session: b.ref()}, wire()
}

// writeRequest takes the value writeValue read. A value sent as text is
// judged in value's place under text's name: the client sent text.
func writeRequest(m *fencev1.WriteRequest, value []byte, b binding) (fence.WriteRequest, []fence.FieldCheck) {
	var tc fence.FieldCheck
	if m.GetText() != "" && len(value) > fence.MaxValueBytes {
		tc = fence.FieldCheck{Field: "value", Err: fence.Invalid("text", fmt.Sprintf("at most %d bytes", fence.MaxValueBytes), fmt.Sprintf("(%d bytes)", len(value)))}
	}
	st, tok, sc := signedRequestToken(m.GetSignedToken(), m.GetToken())
	return fence.WriteRequest{Resource: m.GetResource(), Token: tok, Value: value, OpID: m.GetOpId(), Session: b.ref(), Signed: st}, wire(tc, sc)
}

func addRequest(m *fencev1.AddRequest, b binding) (fence.AddRequest, []fence.FieldCheck) {
	st, tok, sc := signedRequestToken(m.GetSignedToken(), m.GetToken())
	return fence.AddRequest{Resource: m.GetResource(), Token: tok, Delta: m.GetDelta(), OpID: m.GetOpId(), Session: b.ref(), Signed: st}, wire(sc)
}

func deleteRequest(m *fencev1.DeleteRequest, b binding) (fence.DeleteRequest, []fence.FieldCheck) {
	st, tok, sc := signedRequestToken(m.GetSignedToken(), m.GetToken())
	return fence.DeleteRequest{Resource: m.GetResource(), Token: tok, OpID: m.GetOpId(), Session: b.ref(), Signed: st}, wire(sc)
}

func openRequest(m *fencev1.OpenSessionRequest, max time.Duration) (fence.OpenSessionRequest, []fence.FieldCheck) {
	t, tc := ttl(m.GetTtl(), max)
	return fence.OpenSessionRequest{TTL: t, RequestID: m.GetRequestId()}, wire(tc)
}

// keepAliveRequest is a keepalive of the session b binds it to (the
// request's, or on a stream the stream's).
func keepAliveRequest(m *fencev1.KeepAliveRequest, b binding, max time.Duration) (fence.KeepAliveRequest, []fence.FieldCheck) {
	t, tc := ttl(m.GetTtl(), max)
	return fence.KeepAliveRequest{ID: b.session, TTL: t, Session: b.ref()}, wire(tc)
}

func closeRequest(b binding) (fence.CloseSessionRequest, []fence.FieldCheck) {
	return fence.CloseSessionRequest{ID: b.session, Session: b.ref()}, wire()
}

// listRequest reads page_size (0: DefaultPageSize) and page_token, each
// judged in the place of the limit and the after it sets.
func listRequest(m *fencev1.ListRequest) (fence.ListRequest, []fence.FieldCheck) {
	size, serr := pageSize(m.GetPageSize())
	after, terr := decodePageToken(m.GetPageToken())
	return fence.ListRequest{Prefix: m.GetPrefix(), After: after, Limit: size},
		[]fence.FieldCheck{{Field: "limit", Err: serr}, {Field: "after", Err: terr}}
}

// signedRequestToken reads a write's optional signed_token: its parsed
// form and the request's token (the token field, or the signed token's
// when the field is absent), and the wire check of a malformed one (judged
// in signed_token's place).
func signedRequestToken(text string, token uint64) (fence.SignedToken, fence.Token, fence.FieldCheck) {
	if text == "" {
		return fence.SignedToken{}, fence.Token(token), fence.FieldCheck{}
	}
	st, err := fence.ParseSignedToken(text)
	if err != nil {
		var inv *fence.InvalidError
		if errors.As(err, &inv) {
			// Not the text: a malformed proof may be a real one with a
			// character too many, a bearer credential (errors are logged).
			err = fence.Invalid("signed_token", inv.Bound, fmt.Sprintf("%d bytes", len(text)))
		}
		if token == 0 {
			// The token was to come from the signed token: the refusal
			// names signed_token, not a token 0 the caller never sent
			// (the call is refused either way; 1 stands in for it).
			token = 1
		}
		return fence.SignedToken{}, fence.Token(token), fence.FieldCheck{Field: "signed_token", Err: err}
	}
	if token == 0 {
		token = uint64(st.Token)
	}
	return st, fence.Token(token), fence.FieldCheck{}
}
