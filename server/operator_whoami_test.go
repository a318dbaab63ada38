package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/testutil"
)

// WhoAmI names the caller and what its roles allow by prefix; with
// checking off the caller is an anonymous admin.
func TestWhoAmINamesTheCallerAndItsPermissionsByPrefix(t *testing.T) {
	t.Parallel()
	_, url := startServerOnNode(t, Config{})
	off := (&authFixture{t: t, url: url}).must(fencev1connect.OperatorServiceWhoAmIProcedure, "", `{}`)
	if off["principal"] != nil || off["admin"] != true || off["authEnabled"] != nil || off["permissions"] != nil {
		t.Fatalf("checking off: %s; want an anonymous admin, auth not enabled, no permissions", off["_raw"])
	}

	f := newOperatorFixture(t, nil)
	mixed := f.must(fencev1connect.OperatorServiceWhoAmIProcedure, f.creds["mixed"], `{}`)
	perms := fmt.Sprint(objects(mixed["permissions"]))
	if want := "[map[lock:true prefix:jobs/ read:true] map[lock:true prefix:other/]]"; perms != want || mixed["admin"] != nil ||
		mixed["authEnabled"] != true || !strings.HasPrefix(fmt.Sprint(mixed["principal"]), "token:") {
		t.Fatalf("mixed: %s; permissions %s, want %s, not admin, auth enabled, a token principal", mixed["_raw"], perms, want)
	}
	if admin := f.must(fencev1connect.OperatorServiceWhoAmIProcedure, f.creds["admin"], `{}`); admin["admin"] != true {
		t.Fatalf("admin: %s", admin["_raw"])
	}
	f.refused(fencev1connect.OperatorServiceWhoAmIProcedure, "", `{}`, http.StatusUnauthorized, "UNAUTHENTICATED")
}

// An admin releases another principal's lease by its token (audited with
// the holder); the token is the confirmation: once the lock has passed to
// a newer holder, the old token is refused STALE_TOKEN naming the newer
// one, and the newer holder keeps it. Another principal may not release
// it at all.
func TestAdminReleaseOfAnotherPrincipalsLeaseNeedsItsCurrentToken(t *testing.T) {
	t.Parallel()
	logs := &testutil.Buffer{}
	f := newOperatorFixture(t, newTextLogger(logs))
	jobs, admin := f.creds["jobs"], f.creds["admin"]
	t1 := num(f.must(fencev1connect.LockServiceAcquireProcedure, jobs, `{"name":"jobs/r","owner":"worker-1","ttl":"60s"}`)["lease"].(map[string]any)["token"])
	f.refused(fencev1connect.LockServiceReleaseProcedure, f.creds["mixed"], fmt.Sprintf(`{"name":"jobs/r","token":%d}`, t1), http.StatusForbidden, "PERMISSION_DENIED")
	f.must(fencev1connect.LockServiceReleaseProcedure, admin, fmt.Sprintf(`{"name":"jobs/r","token":%d}`, t1))
	if g := f.must(fencev1connect.LockServiceGetProcedure, admin, `{"name":"jobs/r"}`); g["lock"].(map[string]any)["lease"] != nil {
		t.Fatalf("after the admin's release the lock is still held: %s", g["_raw"])
	}
	if out := logs.String(); !strings.Contains(out, "msg=audit event=admin method=Release") || !strings.Contains(out, fmt.Sprintf("name=jobs/r token=%d holder=token:", t1)) {
		t.Errorf("the admin's release of another's lease is not audited with the token and the holder:\n%s", out)
	}

	t2 := num(f.must(fencev1connect.LockServiceAcquireProcedure, jobs, `{"name":"jobs/r","owner":"worker-2","ttl":"60s"}`)["lease"].(map[string]any)["token"])
	out := f.refused(fencev1connect.LockServiceReleaseProcedure, admin, fmt.Sprintf(`{"name":"jobs/r","token":%d}`, t1), http.StatusBadRequest, "STALE_TOKEN")
	if facts, _ := out["facts"].(map[string]any); num(facts["lastToken"]) != t2 {
		t.Errorf("the stale release names %v, want the newer token %d: %s", facts["lastToken"], t2, out["_raw"])
	}
	if g := f.must(fencev1connect.LockServiceGetProcedure, admin, `{"name":"jobs/r"}`); num(g["lock"].(map[string]any)["lease"].(map[string]any)["token"]) != t2 {
		t.Fatalf("the newer holder lost the lock: %s", g["_raw"])
	}
	// An admin's release of its own lease is no audit event.
	before := strings.Count(logs.String(), "method=Release")
	t3 := num(f.must(fencev1connect.LockServiceAcquireProcedure, admin, `{"name":"own","ttl":"60s"}`)["lease"].(map[string]any)["token"])
	f.must(fencev1connect.LockServiceReleaseProcedure, admin, fmt.Sprintf(`{"name":"own","token":%d}`, t3))
	if after := strings.Count(logs.String(), "method=Release"); after != before {
		t.Errorf("an admin's release of its own lease was audited")
	}
}
