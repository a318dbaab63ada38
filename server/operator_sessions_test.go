package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// openWithLeases opens a session as auth and acquires names in it; it
// returns the session's id.
func openWithLeases(f *authFixture, auth string, names ...string) uint64 {
	f.t.Helper()
	out := f.must(fencev1connect.SessionServiceOpenProcedure, auth, `{"ttl":"60s"}`)
	id := num(out["session"].(map[string]any)["id"])
	for _, n := range names {
		f.must(fencev1connect.LockServiceAcquireProcedure, auth, fmt.Sprintf(`{"name":%q,"owner":"w","session":{"id":%d}}`, n, id))
	}
	return id
}

// sessionsOf lists every page of ListSessions as auth with limit.
func sessionsOf(f *authFixture, auth string, limit int) (all []map[string]any, pages int) {
	f.t.Helper()
	tok := ""
	for {
		out := f.must(fencev1connect.OperatorServiceListSessionsProcedure, auth, fmt.Sprintf(`{"limit":%d,"pageToken":%q}`, limit, tok))
		all = append(all, objects(out["sessions"])...)
		pages++
		tok, _ = out["nextPageToken"].(string)
		if tok == "" {
			return all, pages
		}
		if pages > 100 {
			f.t.Fatal("ListSessions never ends")
		}
	}
}

// ListSessions: an admin sees every session, another principal only its
// own; a lease is listed where the caller may read its name, otherwise
// only counted; pages follow one another to the end.
func TestListSessionsShowsEachCallerWhatItMayRead(t *testing.T) {
	t.Parallel()
	f := newOperatorFixture(t, nil)
	mixed := openWithLeases(f, f.creds["mixed"], "jobs/m", "other/m")
	other := openWithLeases(f, f.creds["other"], "other/o")

	all, pages := sessionsOf(f, f.creds["admin"], 1)
	if len(all) != 2 || pages != 2 || num(all[0]["sessionId"]) != mixed || num(all[1]["sessionId"]) != other {
		t.Fatalf("the admin's pages of 1: %d pages %v; want sessions %d and %d", pages, all, mixed, other)
	}
	if l := objects(all[0]["leases"]); len(l) != 2 || l[0]["name"] != "jobs/m" || l[1]["name"] != "other/m" || num(all[0]["hiddenLeases"]) != 0 {
		t.Errorf("the admin sees mixed's leases %v (hidden %v), want jobs/m and other/m", l, all[0]["hiddenLeases"])
	}
	s := all[0]
	if s["principal"] == "" || num(s["ttlMs"]) != 60000 || num(s["expiresInMs"]) == 0 || num(s["expiresInMs"]) > 60000 {
		t.Errorf("mixed's session: %v; want its principal, ttlMs 60000, 0 < expiresInMs <= 60000", s)
	}

	mine, _ := sessionsOf(f, f.creds["mixed"], 0)
	if len(mine) != 1 || num(mine[0]["sessionId"]) != mixed {
		t.Fatalf("mixed lists %v, want its own session %d only", mine, mixed)
	}
	if l := objects(mine[0]["leases"]); len(l) != 1 || l[0]["name"] != "jobs/m" || num(mine[0]["hiddenLeases"]) != 1 {
		t.Errorf("mixed (no read on other/) sees leases %v hidden %v; want jobs/m listed, 1 hidden", l, mine[0]["hiddenLeases"])
	}
	if l := objects(mine[0]["leases"]); len(l) == 1 && (l[0]["mode"] != "exclusive" || num(l[0]["token"]) == 0 || l[0]["owner"] != "w") {
		t.Errorf("the lease: %v; want its token, mode exclusive, owner w", l[0])
	}
	if theirs, _ := sessionsOf(f, f.creds["other"], 0); len(theirs) != 1 || num(theirs[0]["sessionId"]) != other {
		t.Errorf("other lists %v, want its own session %d only", theirs, other)
	}
	if none, _ := sessionsOf(f, f.creds["read"], 0); len(none) != 0 {
		t.Errorf("read (no session of its own) lists %v", none)
	}
	f.refused(fencev1connect.OperatorServiceListSessionsProcedure, "", `{}`, http.StatusUnauthorized, "UNAUTHENTICATED")
	f.invalidField(fencev1connect.OperatorServiceListSessionsProcedure, f.creds["admin"], `{"limit":1001}`, "limit")
	f.invalidField(fencev1connect.OperatorServiceListSessionsProcedure, f.creds["admin"], `{"pageToken":"x"}`, "page_token")
}
