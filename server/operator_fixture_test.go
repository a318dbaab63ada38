package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// newOperatorFixture is newAuthFixture over a real node (so the operator
// view is fed its applied changes), with three more callers: jobs (lock,
// read and write on jobs/), other (the same on other/) and mixed (lock on
// jobs/ and other/, read on jobs/ only).
func newOperatorFixture(t *testing.T, logger *slog.Logger) *authFixture {
	t.Helper()
	s, url := startServerOnNode(t, Config{Logger: logger})
	f := authFixtureOn(t, s, url)
	admin := f.creds["admin"]
	for role, perms := range map[string]string{
		"jobsall":  `["lock:jobs/","read:jobs/","write:jobs/"]`,
		"otherall": `["lock:other/","read:other/","write:other/"]`,
		"mixed":    `["lock:jobs/","lock:other/","read:jobs/"]`,
	} {
		f.must(fencev1connect.AuthServiceGrantRoleProcedure, admin, fmt.Sprintf(`{"role":%q,"permissions":%s}`, role, perms))
	}
	for name, role := range map[string]string{"jobs": "jobsall", "other": "otherall", "mixed": "mixed"} {
		out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, admin, fmt.Sprintf(`{"roles":[%q],"description":%q}`, role, name))
		f.creds[name] = bearer(out["secret"].(string))
	}
	return f
}

// refused posts and fails unless the call is refused with status and
// reason; it returns the refusal's body.
func (f *authFixture) refused(proc, auth, body string, status int, reason string) map[string]any {
	f.t.Helper()
	code, out := f.post(proc, auth, body)
	if code != status || out["reason"] != reason {
		f.t.Fatalf("%s %s: %d %s; want %d %s", proc, body, code, out["_raw"], status, reason)
	}
	return out
}

// invalidField fails unless the call is refused INVALID_ARGUMENT naming
// field.
func (f *authFixture) invalidField(proc, auth, body, field string) {
	f.t.Helper()
	out := f.refused(proc, auth, body, http.StatusBadRequest, "INVALID_ARGUMENT")
	facts, _ := out["facts"].(map[string]any)
	if facts["field"] != field {
		f.t.Fatalf("%s %s: refused naming %v, want field %q: %s", proc, body, facts["field"], field, out["_raw"])
	}
}

// num is a JSON number of a reply as a uint64 (0 when absent).
func num(v any) uint64 {
	n, _ := v.(float64)
	return uint64(n)
}

// objects is a JSON array of a reply as its objects.
func objects(v any) []map[string]any {
	a, _ := v.([]any)
	out := make([]map[string]any, len(a))
	for i, e := range a {
		out[i], _ = e.(map[string]any)
	}
	return out
}

// newTextLogger logs text to w.
func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
