package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/memservice"
)

// authFixture is a server with auth bootstrapped and enabled, and a token
// for each kind of caller.
type authFixture struct {
	t     *testing.T
	s     *Server
	url   string
	creds map[string]string // caller name → Authorization header value ("" none)
}

// post sends a plain JSON call as the caller whose Authorization is auth.
func (f *authFixture) post(proc, auth, body string) (int, map[string]any) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+proc, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	out["_raw"] = string(b)
	return resp.StatusCode, out
}

// must posts and fails unless the call is answered 200.
func (f *authFixture) must(proc, auth, body string) map[string]any {
	f.t.Helper()
	code, out := f.post(proc, auth, body)
	if code != http.StatusOK {
		f.t.Fatalf("%s %s: %d %s", proc, body, code, out["_raw"])
	}
	return out
}

func bearer(secret string) string { return "Bearer " + secret }

// newAuthFixture bootstraps a fresh server, makes the roles and tokens
// and enables checking: callers none, wrong (a well-formed secret never
// issued), revoked (lock on jobs/, revoked), lock, read, write (each on
// jobs/), otherlock (lock on other/), admin (the bootstrap token).
func newAuthFixture(t *testing.T) *authFixture { return newAuthFixtureWith(t, Config{}) }

func newAuthFixtureWith(t *testing.T, cfg Config) *authFixture {
	s, url := startServerWith(t, cfg)
	return authFixtureOn(t, s, url)
}

// authFixtureOn is newAuthFixture over server s, fresh, at url.
func authFixtureOn(t *testing.T, s *Server, url string) *authFixture {
	f := &authFixture{t: t, s: s, url: url, creds: map[string]string{"none": ""}}
	boot := f.must(fencev1connect.AuthServiceBootstrapProcedure, "", `{}`)
	admin := bearer(boot["secret"].(string))
	f.creds["admin"] = admin
	for role, perm := range map[string]string{"locker": "lock:jobs/", "reader": "read:jobs/", "writer": "write:jobs/", "otherlock": "lock:other/"} {
		f.must(fencev1connect.AuthServiceGrantRoleProcedure, admin, fmt.Sprintf(`{"role":%q,"permissions":[%q]}`, role, perm))
	}
	f.must(fencev1connect.AuthServiceGrantRoleProcedure, admin, `{"role":"readwriter","permissions":["read:jobs/","write:jobs/"]}`)
	for name, role := range map[string]string{"lock": "locker", "read": "reader", "write": "writer", "readwrite": "readwriter", "otherlock": "otherlock", "revoked": "locker"} {
		out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, admin, fmt.Sprintf(`{"roles":[%q],"description":%q}`, role, name))
		f.creds[name] = bearer(out["secret"].(string))
		if name == "revoked" {
			id := out["token"].(map[string]any)["id"].(string)
			f.must(fencev1connect.AuthServiceRevokeTokenProcedure, admin, fmt.Sprintf(`{"id":%q}`, id))
			f.creds["wrong"] = bearer("fence_" + id + "_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
		}
	}
	f.must(fencev1connect.AuthServiceSetEnabledProcedure, admin, `{"enabled":true}`)
	return f
}

// fingerprint is what a call could change: tokens, locks, resources,
// sessions and the auth state (not server time).
func (f *authFixture) fingerprint() string {
	var b bytes.Buffer
	storeOf(f.s).(*memservice.Service).Machine(func(m *state.Machine) {
		fmt.Fprintf(&b, "last=%d sessions=%d enabled=%t boots=%d\n", m.LastToken(), m.Sessions(), m.AuthEnabled(), m.AuthBootstraps())
		for _, l := range m.Locks("", m.Now()) {
			fmt.Fprintf(&b, "lock %s %v %d\n", l.Name, l.Lease != nil, l.LastToken)
			if l.Lease != nil {
				fmt.Fprintf(&b, " ttl %s\n", l.Lease.TTL)
			}
		}
		for _, r := range []string{"jobs/r", "jobs/n"} {
			rs := m.Resource(r)
			fmt.Fprintf(&b, "res %s %d %d %t\n", r, rs.Version, rs.LastToken, rs.Deleted)
		}
		for _, k := range m.SigningKeys() {
			fmt.Fprintf(&b, "key %s %s\n", k.ID, k.Status)
		}
		for _, t := range m.AuthTokens() {
			fmt.Fprintf(&b, "token %s %v %t\n", t.ID, t.Roles, t.Revoked)
		}
		for _, r := range m.Roles() {
			fmt.Fprintf(&b, "role %s %v %v\n", r.Name, r.Perms, r.Certs)
		}
	})
	return b.String()
}

// rpc is one procedure: the permission it needs ("" any authenticated
// caller; "never": refused to everyone once bootstrapped; "open": served
// to everyone) and its body, made ready by setup as caller owner (the
// caller itself when it may, else the admin).
type rpc struct {
	proc string
	perm string
	body func(f *authFixture, owner string, n int) string
}

func acquireAs(f *authFixture, owner, name string) uint64 {
	out := f.must(fencev1connect.LockServiceAcquireProcedure, f.creds[owner], fmt.Sprintf(`{"name":%q,"owner":"o","ttl":"60s"}`, name))
	var tok uint64
	fmt.Sscan(fmt.Sprint(out["lease"].(map[string]any)["token"]), &tok)
	return tok
}

func openAs(f *authFixture, owner string) uint64 {
	out := f.must(fencev1connect.SessionServiceOpenProcedure, f.creds[owner], `{"ttl":"60s"}`)
	var id uint64
	fmt.Sscan(fmt.Sprint(out["session"].(map[string]any)["id"]), &id)
	return id
}

var authRPCs = []rpc{
	{fencev1connect.LockServiceAcquireProcedure, "lock", func(f *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"name":"jobs/a%d","owner":"o","ttl":"30s"}`, n)
	}},
	{fencev1connect.LockServiceRenewProcedure, "lock", func(f *authFixture, owner string, n int) string {
		name := fmt.Sprintf("jobs/renew%d", n)
		return fmt.Sprintf(`{"name":%q,"token":%d,"ttl":"90s"}`, name, acquireAs(f, owner, name))
	}},
	{fencev1connect.LockServiceReleaseProcedure, "lock", func(f *authFixture, owner string, n int) string {
		name := fmt.Sprintf("jobs/rel%d", n)
		return fmt.Sprintf(`{"name":%q,"token":%d}`, name, acquireAs(f, owner, name))
	}},
	{fencev1connect.LockServiceGetProcedure, "read", func(*authFixture, string, int) string { return `{"name":"jobs/a"}` }},
	{fencev1connect.LockServiceListProcedure, "read", func(*authFixture, string, int) string { return `{"prefix":"jobs/"}` }},
	{fencev1connect.ResourceServiceWriteProcedure, "write", func(f *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"resource":"jobs/r","token":%d,"value":"aGk="}`, acquireAs(f, "admin", fmt.Sprintf("jobs/w%d", n)))
	}},
	{fencev1connect.ResourceServiceAddProcedure, "write+read", func(f *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"resource":"jobs/n","token":%d,"delta":1}`, acquireAs(f, "admin", fmt.Sprintf("jobs/w%d", n)))
	}},
	{fencev1connect.ResourceServiceDeleteProcedure, "write", func(f *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"resource":"jobs/r","token":%d}`, acquireAs(f, "admin", fmt.Sprintf("jobs/w%d", n)))
	}},
	{fencev1connect.ResourceServiceReadProcedure, "read", func(*authFixture, string, int) string { return `{"resource":"jobs/r"}` }},
	{fencev1connect.SessionServiceOpenProcedure, "lock", func(*authFixture, string, int) string { return `{"ttl":"30s"}` }},
	{fencev1connect.SessionServiceKeepAliveProcedure, "lock", func(f *authFixture, owner string, _ int) string {
		return fmt.Sprintf(`{"session":%d,"ttl":"10s"}`, openAs(f, owner))
	}},
	{fencev1connect.SessionServiceCloseProcedure, "lock", func(f *authFixture, owner string, _ int) string {
		return fmt.Sprintf(`{"session":%d}`, openAs(f, owner))
	}},
	{fencev1connect.ClusterServiceMembersProcedure, "admin", func(*authFixture, string, int) string { return `{}` }},
	// NodeStatus: any authenticated caller (a non-admin sees role and
	// ready only: system_test TestSessionStreamFollowsTheLeader).
	{fencev1connect.ClusterServiceNodeStatusProcedure, "", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.ClusterServiceAddMemberProcedure, "admin", func(*authFixture, string, int) string {
		return `{"id":"n2","raftAddr":"127.0.0.1:1"}`
	}},
	{fencev1connect.ClusterServiceRemoveMemberProcedure, "admin", func(*authFixture, string, int) string { return `{"id":"n9"}` }},
	{fencev1connect.ClusterServiceTransferLeadershipProcedure, "admin", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.AuthServiceBootstrapProcedure, "never", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.AuthServiceSetEnabledProcedure, "admin", func(*authFixture, string, int) string { return `{"enabled":true}` }},
	{fencev1connect.AuthServiceStatusProcedure, "", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.AuthServiceCreateTokenProcedure, "admin", func(*authFixture, string, int) string { return `{"roles":["reader"]}` }},
	{fencev1connect.AuthServiceListTokensProcedure, "admin", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.AuthServiceRevokeTokenProcedure, "admin", func(f *authFixture, _ string, _ int) string {
		out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["reader"]}`)
		return fmt.Sprintf(`{"id":%q}`, out["token"].(map[string]any)["id"])
	}},
	{fencev1connect.AuthServiceGrantRoleProcedure, "admin", func(_ *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"role":"tmp%d","permissions":["read:x/"]}`, n)
	}},
	{fencev1connect.AuthServiceRevokeRoleProcedure, "admin", func(f *authFixture, _ string, n int) string {
		f.must(fencev1connect.AuthServiceGrantRoleProcedure, f.creds["admin"], fmt.Sprintf(`{"role":"gone%d","permissions":["read:x/"]}`, n))
		return fmt.Sprintf(`{"role":"gone%d"}`, n)
	}},
	{fencev1connect.AuthServiceListRolesProcedure, "admin", func(*authFixture, string, int) string { return `{}` }},
	// The key set is public (as GET /v1/keys); key changes are an admin's.
	{fencev1connect.KeyServiceListKeysProcedure, "open", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.KeyServiceRotateKeyProcedure, "admin", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.KeyServiceRetireKeyProcedure, "admin", func(f *authFixture, _ string, _ int) string {
		old := f.must(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["admin"], `{}`)["keyId"]
		f.must(fencev1connect.KeyServiceRotateKeyProcedure, f.creds["admin"], `{}`)
		return fmt.Sprintf(`{"keyId":%q}`, old)
	}},
	{fencev1connect.AuthServiceBindRoleProcedure, "admin", func(_ *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"role":"reader","certName":"cn-%d"}`, n)
	}},
	{fencev1connect.AuthServiceSetRoleQuotaProcedure, "admin", func(_ *authFixture, _ string, n int) string {
		return fmt.Sprintf(`{"role":"reader","quota":{"sessions":%d}}`, n+1)
	}},
	// The operator view: who am I, sessions (filtered) and activity for
	// any caller; a lock's story needs read on it; the cluster an admin.
	{fencev1connect.OperatorServiceWhoAmIProcedure, "", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.OperatorServiceListSessionsProcedure, "", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.OperatorServiceActivityProcedure, "", func(*authFixture, string, int) string { return `{}` }},
	{fencev1connect.OperatorServiceLockStoryProcedure, "read", func(*authFixture, string, int) string { return `{"name":"jobs/a"}` }},
	{fencev1connect.OperatorServiceClusterOverviewProcedure, "admin", func(*authFixture, string, int) string { return `{}` }},
	{healthCheckProcedure, "open", func(*authFixture, string, int) string { return `{}` }},
}

// Every unary procedure × {no credentials, a wrong token, a revoked token,
// each permission, a permission on another prefix, an admin}: served
// exactly where the permission allows (an admin everywhere), refused
// UNAUTHENTICATED (401) without valid credentials and PERMISSION_DENIED
// (403) naming the missing permission otherwise, and a refused call
// changes nothing. Streaming procedures are in TestAuthStreams.
func TestAuthEveryRPCByCaller(t *testing.T) {
	f := newAuthFixture(t)
	covered := map[string]bool{}
	for _, r := range authRPCs {
		covered[r.proc] = true
	}
	for path, p := range procedures {
		if !p.stream && !covered[path] && !strings.HasPrefix(path, "/grpc.reflection.") {
			t.Errorf("%s: no row in authRPCs", path)
		}
	}
	callers := []string{"none", "wrong", "revoked", "lock", "read", "write", "readwrite", "otherlock", "admin"}
	// has[caller] are the permissions its token's role holds on jobs/.
	has := map[string][]string{"lock": {"lock"}, "read": {"read"}, "write": {"write"}, "readwrite": {"read", "write"}}
	n := 0
	for _, r := range authRPCs {
		for _, who := range callers {
			n++
			valid := who != "none" && who != "wrong" && who != "revoked"
			var allowed bool
			switch r.perm {
			case "open":
				allowed = true
			case "never":
				allowed = false
			case "":
				allowed = valid
			default:
				allowed = who == "admin" || who == "otherlock" && r.proc == fencev1connect.SessionServiceOpenProcedure // lock on any prefix opens a session
				if !allowed && len(has[who]) > 0 {
					allowed = true
					for _, p := range strings.Split(r.perm, "+") {
						allowed = allowed && slices.Contains(has[who], p)
					}
				}
			}
			owner := "admin"
			if allowed && who != "admin" && r.perm == "lock" {
				owner = who
			}
			body := r.body(f, owner, n)
			before := f.fingerprint()
			code, out := f.post(r.proc, f.creds[who], body)
			what := fmt.Sprintf("%s as %s %s", r.proc, who, body)
			if allowed {
				if code == http.StatusUnauthorized || code == http.StatusForbidden {
					t.Errorf("%s: refused %d %s, want served", what, code, out["_raw"])
				} else if code != http.StatusOK && !strings.Contains(r.proc, "ClusterService/") {
					t.Errorf("%s: %d %s, want 200", what, code, out["_raw"])
				}
				continue
			}
			facts, _ := out["facts"].(map[string]any)
			switch {
			case r.perm == "open":
			case !valid && r.perm != "never":
				if code != http.StatusUnauthorized || out["reason"] != "UNAUTHENTICATED" {
					t.Errorf("%s: %d %s, want 401 UNAUTHENTICATED", what, code, out["_raw"])
				}
			case r.perm == "never":
				if code != http.StatusForbidden || out["reason"] != "PERMISSION_DENIED" {
					t.Errorf("%s: %d %s, want 403 PERMISSION_DENIED", what, code, out["_raw"])
				}
			default:
				want := ""
				for _, p := range strings.Split(r.perm, "+") { // the first one missing
					if want == "" && !slices.Contains(has[who], p) {
						want = p
					}
				}
				if who == "otherlock" && strings.HasPrefix(r.proc, "/fence.v1.SessionService/") && r.proc != fencev1connect.SessionServiceOpenProcedure {
					want = "session" // lock on some prefix opens a session; another's session is refused as not its own
				}
				if code != http.StatusForbidden || out["reason"] != "PERMISSION_DENIED" || facts["permission"] != want {
					t.Errorf("%s: %d %s, want 403 PERMISSION_DENIED naming %s", what, code, out["_raw"], want)
				}
			}
			if after := f.fingerprint(); after != before {
				t.Errorf("%s: the refused call changed the state:\n%s\nthen\n%s", what, before, after)
			}
		}
	}
}

// The streaming procedures: a backup needs an admin; a session stream
// needs the lock permission and the session's own principal.
func TestAuthStreams(t *testing.T) {
	f := newAuthFixture(t)
	ctx := context.Background()
	hc := &http.Client{}
	for _, who := range []string{"none", "wrong", "revoked", "lock", "read", "admin"} {
		c := fencev1connect.NewMaintenanceServiceClient(hc, f.url)
		req := connect.NewRequest(&fencev1.BackupRequest{})
		if a := f.creds[who]; a != "" {
			req.Header().Set("Authorization", a)
		}
		st, err := c.Backup(ctx, req)
		if err == nil {
			for st.Receive() {
			}
			err = st.Err()
			st.Close()
		}
		want := map[string]connect.Code{"none": connect.CodeUnauthenticated, "wrong": connect.CodeUnauthenticated,
			"revoked": connect.CodeUnauthenticated, "lock": connect.CodePermissionDenied, "read": connect.CodePermissionDenied}[who]
		if got := connect.CodeOf(err); err != nil && got != want || err == nil && want != 0 {
			t.Errorf("Backup as %s: %v, want %v", who, err, want)
		}
	}
	// A session stream on the lock caller's session: refused to the
	// others (the reader lacks lock; otherlock has lock, but not on this
	// session), served to its owner.
	id := openAs(f, "lock")
	for _, who := range []string{"none", "read", "otherlock", "lock"} {
		c := fencev1connect.NewSessionServiceClient(h2cClient(), f.url, connect.WithGRPC())
		sctx, cancel := context.WithCancel(ctx)
		st := c.Stream(sctx)
		if a := f.creds[who]; a != "" {
			st.RequestHeader().Set("Authorization", a)
		}
		err := st.Send(&fencev1.SessionRequest{Session: id, Call: 1, Op: &fencev1.SessionRequest_Get{Get: &fencev1.GetRequest{Name: "jobs/x"}}})
		if err == nil || errors.Is(err, io.EOF) {
			// io.EOF: the server ended the stream first (a refusal made
			// before the first message); Receive says why.
			_, err = st.Receive()
		}
		cancel()
		st.CloseRequest()
		st.CloseResponse()
		want := map[string]connect.Code{"none": connect.CodeUnauthenticated, "read": connect.CodePermissionDenied, "otherlock": connect.CodePermissionDenied}[who]
		if got := connect.CodeOf(err); (err == nil) != (want == 0) || err != nil && got != want {
			t.Errorf("Stream as %s: %v, want %v", who, err, want)
		}
	}
}

// A token made with a ttl is served until the store's server time passes
// its expiry, then refused "expired token" — with no other traffic: the
// expiry is a deadline the store ticks at.
func TestAuthExpiredTokenRefused(t *testing.T) {
	f := newAuthFixture(t)
	out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["reader"],"ttl":"0.2s"}`)
	tok := bearer(out["secret"].(string))
	if code, got := f.post(fencev1connect.LockServiceGetProcedure, tok, `{"name":"jobs/a"}`); code != http.StatusOK {
		t.Fatalf("a fresh token with a ttl: %d %s", code, got["_raw"])
	}
	until(t, "the token refused as expired", func() bool {
		code, got := f.post(fencev1connect.LockServiceGetProcedure, tok, `{"name":"jobs/a"}`)
		if code != http.StatusOK && !(code == http.StatusUnauthorized && strings.Contains(got["_raw"].(string), "expired token")) {
			t.Fatalf("the token past its expiry: %d %s", code, got["_raw"])
		}
		return code == http.StatusUnauthorized
	})
}

// With authentication on, a session stream without credentials is refused
// before it takes a slot of MaxStreams: streams that send no token (and
// nothing else) cannot keep a token holder's stream out.
func TestAuthStreamSlotsNeedCredentials(t *testing.T) {
	f := newAuthFixtureWith(t, Config{MaxStreams: 2})
	hc := h2cClient()
	var answered atomic.Int64
	for range 4 {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.Close() })
		req, err := http.NewRequest(http.MethodPost, f.url+fencev1connect.SessionServiceStreamProcedure, pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		go func() {
			if resp, err := hc.Do(req); err == nil {
				answered.Add(1)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	// Each silent stream is either answered at once or holds a slot.
	until(t, "the silent streams to be answered or to hold their slots", func() bool { return answered.Load()+f.s.streams.Load() >= 4 })
	id := openAs(f, "lock")
	c := fencev1connect.NewSessionServiceClient(h2cClient(), f.url, connect.WithGRPC())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := c.Stream(ctx)
	st.RequestHeader().Set("Authorization", f.creds["lock"])
	err := st.Send(&fencev1.SessionRequest{Session: id, Call: 1, Op: &fencev1.SessionRequest_Get{Get: &fencev1.GetRequest{Name: "jobs/x"}}})
	if err == nil {
		_, err = st.Receive()
	}
	st.CloseRequest()
	st.CloseResponse()
	if err != nil {
		t.Fatalf("the token holder's stream while %d streams without credentials were open: %v (slots held %d)", 4-answered.Load(), err, f.s.streams.Load())
	}
}

// A caller that may write a resource but not read it never gets its value
// back: not in its own write's reply, not from another principal's op_id
// it replays (refused PERMISSION_DENIED: an op_id's saved result is its
// writer's), and Add (whose answer is the value) needs read as well (an
// outside test read values with write:jobs/ alone).
func TestAuthWriteOnlyCannotReadValues(t *testing.T) {
	f := newAuthFixture(t)
	tok := acquireAs(f, "admin", "jobs/secret-lock")
	secret := f.must(fencev1connect.ResourceServiceWriteProcedure, f.creds["readwrite"],
		fmt.Sprintf(`{"resource":"jobs/secret","token":%d,"text":"s3cret","opId":"op-1"}`, tok))
	if !strings.Contains(fmt.Sprint(secret["_raw"]), `"value"`) {
		t.Fatalf("a caller with read and write gets no value in its write's reply: %s", secret["_raw"])
	}
	code, replay := f.post(fencev1connect.ResourceServiceWriteProcedure, f.creds["write"],
		fmt.Sprintf(`{"resource":"jobs/secret","token":%d,"text":"s3cret","opId":"op-1"}`, tok))
	if raw := fmt.Sprint(replay["_raw"]); code != http.StatusForbidden || replay["reason"] != "PERMISSION_DENIED" ||
		!strings.Contains(raw, "op_id") || strings.Contains(raw, "czNjcmV0") {
		t.Errorf("write-only caller replaying another principal's op_id: %d %s, want 403 naming the op_id, no value", code, raw)
	}
	for name, body := range map[string]string{
		"its own write": fmt.Sprintf(`{"resource":"jobs/secret","token":%d,"text":"s3cret","opId":"op-2"}`, tok),
		"a delete":      fmt.Sprintf(`{"resource":"jobs/other","token":%d}`, tok),
	} {
		proc := fencev1connect.ResourceServiceWriteProcedure
		if name == "a delete" {
			proc = fencev1connect.ResourceServiceDeleteProcedure
		}
		out := f.must(proc, f.creds["write"], body)
		if raw := fmt.Sprint(out["_raw"]); strings.Contains(raw, `"value"`) || strings.Contains(raw, "czNjcmV0") {
			t.Errorf("write-only caller, %s: the reply holds the value: %s", name, raw)
		}
	}
	code, out := f.post(fencev1connect.ResourceServiceAddProcedure, f.creds["write"], fmt.Sprintf(`{"resource":"jobs/n","token":%d,"delta":0}`, tok))
	if code != http.StatusForbidden || out["reason"] != "PERMISSION_DENIED" {
		t.Errorf("Add with delta 0 by a write-only caller: %d %s, want 403 (its answer is the value)", code, out["_raw"])
	}
}

// A token's ttl is bounded (ten years): one near the end of int64
// nanoseconds made a token expired before it was made. Nothing is created.
func TestAuthTokenTTLBounded(t *testing.T) {
	f := newAuthFixture(t)
	before := f.must(fencev1connect.AuthServiceListTokensProcedure, f.creds["admin"], `{}`)["_raw"]
	for _, ttl := range []string{"9223372036s", "-5s", "315360001s"} {
		code, out := f.post(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], fmt.Sprintf(`{"roles":["reader"],"ttl":%q}`, ttl))
		facts, _ := out["facts"].(map[string]any)
		if code != http.StatusBadRequest || out["reason"] != "INVALID_ARGUMENT" || facts["field"] != "ttl" {
			t.Errorf("CreateToken ttl %s: %d %s, want 400 INVALID_ARGUMENT field ttl", ttl, code, out["_raw"])
		}
	}
	if after := f.must(fencev1connect.AuthServiceListTokensProcedure, f.creds["admin"], `{}`)["_raw"]; after != before {
		t.Errorf("refused CreateToken calls made tokens:\n%s\nthen\n%s", before, after)
	}
	if _, out := f.post(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["reader"],"ttl":"315360000s"}`); out["secret"] == nil {
		t.Errorf("CreateToken with a ttl of ten years: %s, want a token", out["_raw"])
	}
}

// A set acquire needs lock on every name it lists: a caller with lock on
// jobs/ only is refused naming the first name of the set outside jobs/, in
// the order the request lists them, and nothing changes.
func TestAuthSetNeedsLockOnEveryName(t *testing.T) {
	f := newAuthFixture(t)
	before := f.fingerprint()
	for _, tc := range []struct{ locks, want string }{
		{`[{"name":"jobs/a"},{"name":"other/b"},{"name":"other/c"}]`, "other/b"},
		{`[{"name":"other/c"},{"name":"jobs/a"}]`, "other/c"},
		{`[{"name":"jobs/a"},{"name":"jobs/b","mode":"shared"},{"name":"other/c","permits":2}]`, "other/c"},
	} {
		code, out := f.post(fencev1connect.LockServiceAcquireProcedure, f.creds["lock"],
			fmt.Sprintf(`{"locks":%s,"owner":"o","ttl":"30s"}`, tc.locks))
		facts, _ := out["facts"].(map[string]any)
		if code != http.StatusForbidden || out["reason"] != "PERMISSION_DENIED" || facts["name"] != tc.want || facts["permission"] != "lock" {
			t.Errorf("set %s by a caller with lock:jobs/: %d %s, want 403 naming %q", tc.locks, code, out["_raw"], tc.want)
		}
	}
	if after := f.fingerprint(); after != before {
		t.Fatalf("a refused set changed the store:\n%s\nwant\n%s", after, before)
	}
	// Every name allowed: not a permission refusal (granted once the state
	// grants sets).
	code, out := f.post(fencev1connect.LockServiceAcquireProcedure, f.creds["lock"],
		`{"locks":[{"name":"jobs/x"},{"name":"jobs/y"}],"owner":"o","ttl":"30s"}`)
	if code == http.StatusForbidden {
		t.Errorf("set of jobs/ names by a caller with lock:jobs/: %d %s", code, out["_raw"])
	}
}
