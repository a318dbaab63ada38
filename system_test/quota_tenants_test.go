//go:build e2e

package system_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/harness"
)

// One tenant at each of its quotas — sessions, waiting acquires, locks
// held or waited for, remembered op_ids and connections — against a real `fence serve` with
// authentication on: each refusal is RESOURCE_EXHAUSTED naming the quota,
// while a second tenant's `fence hold` takes and holds a lock, its `fence
// write`s with op_ids are accepted, and /healthz answers. Then an admin's
// `fence role quota` raises the role's session quota and the first tenant
// opens one more session.
func TestQuotasOneTenantDoesNotStarveAnother(t *testing.T) {
	srv := startServer(t, "--max-sessions-per-principal", "2", "--max-waiters-per-principal", "2",
		"--max-ids-per-principal", "2", "--max-conns-per-principal", "4", "--max-locks-per-principal", "4")
	bin := fenceBinary(t)
	ctx := context.Background()
	a, err := harness.EnableAuth(ctx, bin, srv.URL(), nil, "tenant", []string{"lock:", "read:", "write:"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	tenantA := "Bearer " + a.Tokens[0]

	// A's calls over plain JSON, each on a connection of its own unless hc
	// keeps one.
	post := func(hc *http.Client, auth, proc, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL()+proc, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	conn := func() *http.Client {
		hc := &http.Client{Timeout: hangGuard, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
		t.Cleanup(hc.CloseIdleConnections)
		return hc
	}
	ok := func(hc *http.Client, auth, proc, body string) map[string]any {
		t.Helper()
		code, out := post(hc, auth, proc, body)
		var m map[string]any
		if code != http.StatusOK || json.Unmarshal([]byte(out), &m) != nil {
			t.Fatalf("%s %s: %d %s", proc, body, code, out)
		}
		return m
	}
	refused := func(hc *http.Client, proc, body, quota string) {
		t.Helper()
		code, out := post(hc, tenantA, proc, body)
		if code != http.StatusTooManyRequests || !strings.Contains(out, "RESOURCE_EXHAUSTED") || !strings.Contains(out, "(config."+quota) {
			t.Fatalf("tenant A at its quota, %s %s: %d %s; want 429 RESOURCE_EXHAUSTED naming %s", proc, body, code, out, quota)
		}
	}
	const (
		open    = "/fence.v1.SessionService/Open"
		acquire = "/fence.v1.LockService/Acquire"
		write   = "/fence.v1.ResourceService/Write"
	)
	ac := conn() // A's one connection for everything but the connection quota

	// Sessions.
	ok(ac, tenantA, open, `{"ttl":"3600s"}`)
	ok(ac, tenantA, open, `{"ttl":"3600s"}`)
	refused(ac, open, `{"ttl":"3600s"}`, "max_sessions_per_principal")

	// Waiting acquires: A holds a/held and queues two more on it.
	g := ok(ac, tenantA, acquire, `{"name":"a/held","ttl":"3600s"}`)
	aToken := g["lease"].(map[string]any)["token"]
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, rid := range []string{"w1", "w2"} {
		go func() {
			req, _ := http.NewRequestWithContext(waitCtx, http.MethodPost, srv.URL()+acquire,
				strings.NewReader(fmt.Sprintf(`{"name":"a/held","ttl":"3600s","wait":"3600s","requestId":%q}`, rid)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", tenantA)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	untilT(t, "A's two acquires queued", func() bool {
		_, out := post(ac, tenantA, "/fence.v1.LockService/Get", `{"name":"a/held"}`)
		return strings.Contains(out, `"waiters":2`)
	})
	refused(ac, acquire, `{"name":"a/held","ttl":"3600s","wait":"1s","requestId":"w3"}`, "max_waiters_per_principal")

	// Locks held or waited for: a/held and its two waits are 3 of 4; a
	// set of two more is refused (a set counts each of its locks), one
	// lock is granted.
	refused(ac, acquire, `{"locks":[{"name":"a/x"},{"name":"a/y"}],"ttl":"3600s"}`, "max_locks_per_principal")
	ok(ac, tenantA, acquire, `{"name":"a/x","ttl":"3600s"}`)

	// Remembered op_ids.
	for _, op := range []string{"o1", "o2"} {
		ok(ac, tenantA, write, fmt.Sprintf(`{"resource":"a/r","token":%v,"text":"x","opId":%q}`, aToken, op))
	}
	refused(ac, write, fmt.Sprintf(`{"resource":"a/r","token":%v,"text":"x","opId":"o3"}`, aToken), "max_ids_per_principal")

	// Connections: ac, the two waiting acquires' and one more are A's
	// four; a fifth is refused.
	ok(conn(), tenantA, "/fence.v1.LockService/Get", `{"name":"a/held"}`)
	refused(conn(), "/fence.v1.LockService/Get", `{"name":"a/held"}`, "max_conns_per_principal")

	// Tenant B is served: fence hold takes and holds a lock, fence write
	// with op_ids is accepted, /healthz answers.
	env := []string{"FENCE_SERVER=" + srv.URL(), "FENCE_AUTH_TOKEN=" + a.Tokens[1]}
	hold := startProc(t, "fence hold", bin, env, "hold", "b/lock", "--ttl", "30s", "--wait", "0")
	line := hold.Line()
	if !strings.HasPrefix(line, "holding b/lock token=") {
		t.Fatalf("tenant B's fence hold: %q", line)
	}
	bToken := strings.Fields(strings.TrimPrefix(line, "holding b/lock token="))[0]
	for _, op := range []string{"b1", "b2"} {
		cmd := exec.Command(bin, "write", "b/lock", "--token", bToken, "--value", op, "--op-id", op)
		cmd.Env = append(cmd.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tenant B's fence write --op-id %s: %v\n%s", op, err, out)
		}
	}
	resp, err := http.Get(srv.URL() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while tenant A is at every quota: %v %v", resp, err)
	}
	resp.Body.Close()

	// The role's own quotas: 3 sessions and 6 locks for tenant's principals.
	cmd := exec.Command(bin, "--server", srv.URL(), "role", "quota", "tenant", "sessions=3", "locks=6")
	cmd.Env = append(cmd.Environ(), "FENCE_AUTH_TOKEN="+a.Admin)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "sessions=3") || !strings.Contains(string(out), "locks=6") {
		t.Fatalf("fence role quota: %v\n%s", err, out)
	}
	ok(ac, tenantA, open, `{"ttl":"3600s"}`)
	refused(ac, open, `{"ttl":"3600s"}`, "max_sessions_per_principal")
	ok(ac, tenantA, acquire, `{"locks":[{"name":"a/y"},{"name":"a/z"}],"ttl":"3600s"}`)
	refused(ac, acquire, `{"name":"a/w","ttl":"3600s"}`, "max_locks_per_principal")
	hold.Signal(2) // SIGINT: B releases
	if code := hold.Wait(); code != 0 {
		t.Fatalf("fence hold exited %d", code)
	}
}
