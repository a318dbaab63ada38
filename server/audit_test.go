package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/testkit/testutil"
)

// The limiter lets auditBurst refusals a second be logged and counts the
// ones it leaves out, reported with the next one logged.
func TestAuditLimiterBoundsAndCountsWhatItLeavesOut(t *testing.T) {
	var l auditLimiter
	t0 := time.Unix(1000, 0)
	for i := range 3 * auditBurst {
		ok, dropped := l.allow(t0)
		if ok != (i < auditBurst) || dropped != 0 {
			t.Fatalf("refusal %d in one second: logged %t (left out before %d)", i, ok, dropped)
		}
	}
	if ok, dropped := l.allow(t0.Add(time.Second)); !ok || dropped != 2*auditBurst {
		t.Fatalf("next second: logged %t, left out before %d; want true, %d", ok, dropped, 2*auditBurst)
	}
}

// Every refusal is counted by reason and audited with the method, the
// principal and the reason, an admin action is audited, and no secret is
// ever in the log.
func TestAuditLogsRefusalsAndAdminActionsWithoutSecrets(t *testing.T) {
	logs := &testutil.Buffer{}
	f := newAuthFixtureWith(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	const n = 4 * auditBurst // more than one second's worth: every one is counted, logged or not
	f.post(fencev1connect.LockServiceAcquireProcedure, f.creds["read"], `{"name":"jobs/a","ttl":"10s"}`)
	f.post(fencev1connect.LockServiceGetProcedure, "", `{"name":"jobs/a"}`)
	f.must(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["reader"]}`)
	for range n { // a flood: logged up to the limit, all counted
		f.post(fencev1connect.LockServiceGetProcedure, f.creds["wrong"], `{"name":"jobs/a"}`)
	}
	if got := counted(t, f.s, "fence_auth_refusals_total", "unknown_token"); got != n {
		t.Errorf("unknown_token refusals counted %v, want %d", got, n)
	}
	if got := counted(t, f.s, "fence_auth_refusals_total", "permission"); got != 1 {
		t.Errorf("permission refusals counted %v, want 1", got)
	}
	if got := counted(t, f.s, "fence_auth_refusals_total", "no_credentials"); got != 1 {
		t.Errorf("no_credentials refusals counted %v, want 1", got)
	}
	out := logs.String()
	for _, want := range []string{
		"msg=audit event=refused method=Get principal=\"\" name=jobs/a reason=unknown_token",
		"msg=audit event=refused method=Acquire principal=token:",
		"reason=permission",
		"msg=audit event=admin method=CreateToken principal=token:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %q:\n%s", want, out)
		}
	}
	for who, c := range f.creds {
		if secret := strings.TrimPrefix(c, "Bearer "); secret != "" && strings.Contains(out, secret) {
			t.Errorf("the log holds %s's secret", who)
		}
	}
}
