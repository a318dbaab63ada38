package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/state"
)

// Two principals with the same role: A fills its quotas of sessions (2),
// waiting acquires (2) and remembered op_ids (2) and is refused
// RESOURCE_EXHAUSTED naming each quota, while B still opens a session,
// acquires, queues, writes with op_ids, and /healthz answers. The quotas
// are per principal, not per role. Then an admin sets the role's own
// session quota (SetRoleQuota, 3): A opens a third session, not a fourth.
func TestOnePrincipalAtItsQuotaDoesNotStarveAnother(t *testing.T) {
	rules := state.DefaultConfig()
	rules.MaxSessionsPerPrincipal, rules.MaxWaitersPerPrincipal, rules.MaxIDsPerPrincipal = 2, 2, 2
	s, url := startServerRules(t, rules)
	f := authFixtureOn(t, s, url)
	admin := f.creds["admin"]
	f.must(fencev1connect.AuthServiceGrantRoleProcedure, admin, `{"role":"tenant","permissions":["lock:jobs/","write:jobs/"]}`)
	token := func(name string) string {
		out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, admin, fmt.Sprintf(`{"roles":["tenant"],"description":%q}`, name))
		return bearer(out["secret"].(string))
	}
	a, b := token("a"), token("b")

	exhausted := func(who, proc, auth, body, quota string) {
		t.Helper()
		code, out := f.post(proc, auth, body)
		if raw := out["_raw"].(string); code != http.StatusTooManyRequests || out["code"] != "resource_exhausted" ||
			!strings.Contains(raw, "(config."+quota+" or its roles' quota)") {
			t.Fatalf("%s at its quota: %d %s, want resource_exhausted naming %s", who, code, raw, quota)
		}
	}

	// Sessions.
	for range 2 {
		f.must(fencev1connect.SessionServiceOpenProcedure, a, `{"ttl":3600}`)
	}
	exhausted("A", fencev1connect.SessionServiceOpenProcedure, a, `{"ttl":3600}`, "max_sessions_per_principal")
	f.must(fencev1connect.SessionServiceOpenProcedure, b, `{"ttl":3600}`)

	// Waiting acquires: A holds jobs/held and queues two more on it.
	f.must(fencev1connect.LockServiceAcquireProcedure, a, `{"name":"jobs/held","owner":"a","ttl":3600}`)
	ctx, cancel := context.WithCancel(context.Background())
	waits := make(chan error, 3)
	started := 0
	wait := func(auth, rid string) {
		started++
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+fencev1connect.LockServiceAcquireProcedure,
				strings.NewReader(fmt.Sprintf(`{"name":"jobs/held","owner":%q,"ttl":3600,"wait":3600,"requestId":%q}`, rid, rid)))
			if err == nil {
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", auth)
				var resp *http.Response
				if resp, err = http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			waits <- err
		}()
	}
	defer func() {
		cancel()
		for range started {
			<-waits
		}
	}()
	wait(a, "a1")
	wait(a, "a2")
	until(t, "A's two acquires wait", func() bool { return waitersOf(s) == 2 })
	exhausted("A", fencev1connect.LockServiceAcquireProcedure, a,
		`{"name":"jobs/held","owner":"a3","ttl":3600,"wait":1,"requestId":"a3"}`, "max_waiters_per_principal")

	// B is served: it queues behind A, acquires a free lock and writes
	// with its token.
	wait(b, "b1")
	until(t, "B's acquire waits", func() bool { return waitersOf(s) == 3 })
	g := f.must(fencev1connect.LockServiceAcquireProcedure, b, `{"name":"jobs/b","owner":"b","ttl":3600}`)
	tok := g["lease"].(map[string]any)["token"]
	f.must(fencev1connect.ResourceServiceWriteProcedure, b, fmt.Sprintf(`{"resource":"jobs/r","token":%v,"text":"b"}`, tok))
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	if want := `fence_resource_exhausted_total{limit="max_waiters_per_principal"} 1`; !strings.Contains(scrapeMetrics(t, url), want) {
		t.Fatalf("/metrics lacks %q", want)
	}

	// Remembered op_ids: A's third fresh op_id within --min-id-retention
	// is refused; B's are remembered.
	ga := f.must(fencev1connect.LockServiceAcquireProcedure, a, `{"name":"jobs/a","owner":"a","ttl":3600}`)
	atok := ga["lease"].(map[string]any)["token"]
	for _, op := range []string{"o1", "o2"} {
		f.must(fencev1connect.ResourceServiceWriteProcedure, a, fmt.Sprintf(`{"resource":"jobs/ra","token":%v,"text":%q,"opId":%q}`, atok, op, op))
	}
	exhausted("A", fencev1connect.ResourceServiceWriteProcedure, a,
		fmt.Sprintf(`{"resource":"jobs/ra","token":%v,"text":"o3","opId":"o3"}`, atok), "max_ids_per_principal")
	for _, op := range []string{"o1", "o2"} {
		f.must(fencev1connect.ResourceServiceWriteProcedure, b, fmt.Sprintf(`{"resource":"jobs/rb","token":%v,"text":%q,"opId":%q}`, tok, op, op))
	}

	// The role's own quota: 3 sessions for tenant's principals.
	f.must(fencev1connect.AuthServiceSetRoleQuotaProcedure, admin, `{"role":"tenant","quota":{"sessions":3}}`)
	roles := f.must(fencev1connect.AuthServiceListRolesProcedure, admin, `{}`)
	if !strings.Contains(roles["_raw"].(string), `"quota":{"sessions":3}`) {
		t.Fatalf("ListRoles does not show the quota: %s", roles["_raw"])
	}
	f.must(fencev1connect.SessionServiceOpenProcedure, a, `{"ttl":3600}`)
	code, out := f.post(fencev1connect.SessionServiceOpenProcedure, a, `{"ttl":3600}`)
	if raw := out["_raw"].(string); code != http.StatusTooManyRequests || !strings.Contains(raw, "at most 3") {
		t.Fatalf("A's fourth session under the role's quota 3: %d %s", code, raw)
	}
}
