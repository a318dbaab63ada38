//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/fenceworks/fence/testkit/harness"
)

// A principal whose read covers team-a/ only sees team-a/'s locks: the
// page following "" or team-b/ is refused by the server and shows no
// lock at all (not a filtered view of more), and following team-a/ shows
// team-a/x and never team-b/y.
func TestUIShowsNoLockOfAPrefixThePrincipalMayNotRead(t *testing.T) {
	srv := startServer(t, "--ui=full")
	a, err := harness.EnableAuth(context.Background(), fenceBinary(t), srv.URL(), nil, "team-a", []string{"read:team-a/", "lock:team-a/"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAuthToken(a.Admin)
	for _, name := range []string{"team-a/x", "team-b/y"} {
		if code, body := uiPost(t, srv.URL(), "fence.v1.LockService/Acquire", a.Admin, map[string]any{"name": name, "ttl": "600s", "owner": "admin-made"}); code != 200 {
			t.Fatalf("acquire %s: %d %v", name, code, body)
		}
	}
	b := newUIBrowser(t)
	b.open(srv.URL(), "#/locks")
	b.login(a.Tokens[0])
	none := func(prefix string) {
		t.Helper()
		b.follow(prefix)
		status := uiEval[string](b, `document.getElementById('locks-status').textContent`)
		if !strings.HasPrefix(status, "Not following") || !strings.Contains(status, "(HTTP 403)") {
			t.Fatalf("following %q as a reader of team-a/: status %q, want a refusal", prefix, status)
		}
		if rows := uiEval[[]string](b, `[...document.querySelectorAll('#locks-body tr.lock')].map((r) => r.dataset.name)`); len(rows) != 0 {
			t.Fatalf("following %q as a reader of team-a/: rows %q, want none", prefix, rows)
		}
	}
	none("")
	none("team-b/")
	b.follow("team-a/")
	uiWait[bool](b, "team-a/x", rowJS("team-a/x")+` !== null`)
	if rows := uiEval[[]string](b, `[...document.querySelectorAll('#locks-body tr.lock')].map((r) => r.dataset.name)`); len(rows) != 1 || rows[0] != "team-a/x" {
		t.Fatalf("following team-a/: rows %q, want only team-a/x", rows)
	}
	// Not an admin: no release button even with --ui=full.
	if row := uiEval[uiRow](b, fmt.Sprintf(`(%s)(%s)`, rowFields, rowJS("team-a/x"))); row.Release {
		t.Fatalf("a reader sees a release button: %+v", row)
	}
}

// An admin releases a lock from the page: the button asks first, naming
// the lock's owner and token; confirming frees the lock (the API says so)
// and the row leaves the table.
func TestUIAdminReleasesALockFromThePage(t *testing.T) {
	srv := startServer(t, "--ui=full")
	a, err := harness.EnableAuth(context.Background(), fenceBinary(t), srv.URL(), nil, "none", []string{"read:nothing/"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetAuthToken(a.Admin)
	code, body := uiPost(t, srv.URL(), "fence.v1.LockService/Acquire", a.Admin, map[string]any{"name": "rel/a", "ttl": "600s", "owner": "worker-z"})
	if code != 200 {
		t.Fatalf("acquire: %d %v", code, body)
	}
	tok := lockTokens(t, srv.URL(), a.Admin, "rel/a")
	if len(tok) != 1 {
		t.Fatalf("rel/a holders %v", tok)
	}
	b := newUIBrowser(t)
	b.open(srv.URL(), "#/locks")
	b.login(a.Admin)
	b.follow("rel/")
	row := uiWait[uiRow](b, "the row with its release button", fmt.Sprintf(`(() => { const r = (%s)(%s); return r && r.Release ? r : null; })()`, rowFields, rowJS("rel/a")))
	if row.Token != fmt.Sprint(tok[0]) {
		t.Fatalf("row %+v, want token %d", row, tok[0])
	}
	b.do(chromedp.Click(chromedp.CSS(`#locks-body tr.lock[data-name="rel/a"] td.act-col button`)))
	text := uiWait[string](b, "the confirmation", `document.getElementById('confirm').open && document.getElementById('confirm-text').textContent`)
	for _, w := range []string{`"rel/a"`, `"worker-z"`, fmt.Sprintf("token %d", tok[0])} {
		if !strings.Contains(text, w) {
			t.Fatalf("confirmation %q does not name %s", text, w)
		}
	}
	b.screenshot("release")
	b.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
	uiWait[bool](b, "the row to leave", rowJS("rel/a")+` === null`)
	if held := lockTokens(t, srv.URL(), a.Admin, "rel/a"); len(held) != 0 {
		t.Fatalf("after the release from the page, rel/a is held by %v", held)
	}
}
