//go:build e2e

package system_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fenceworks/fence/client"
)

// The page loads with no console error or exception (a CSP violation, a
// failed load and a script error all count), and a lock the CLI acquires
// appears in the table with its token, owner and a remaining time that
// counts down — followed from the Watch stream, not polled.
func TestUIShowsALockTheCLIAcquiredLive(t *testing.T) {
	srv := startServer(t, "--ui=full")
	b := newUIBrowser(t)
	b.open(srv.URL(), "#/locks")
	b.follow("jobs/")

	out, stderr, code := runCLI(t, srv, "acquire", "jobs/a", "--ttl", "60s", "--owner", "worker-a")
	if code != 0 {
		t.Fatalf("fence acquire: exit %d: %s", code, stderr)
	}
	asked := time.Now()
	tok := field(t, strings.TrimSpace(out), "token")
	row := uiWait[uiRow](b, "the lock's row", fmt.Sprintf(`(%s)(%s)`, rowFields, rowJS("jobs/a")))
	// Reported, not asserted (no timing thresholds in tests): the issue
	// asks for under 1 s on an idle machine.
	t.Logf("the row of jobs/a appeared %v after the CLI returned", time.Since(asked).Round(time.Millisecond))
	if row.Token != tok || row.Owner != "worker-a" || row.Mode != "exclusive" {
		t.Fatalf("row %+v, want token %s owner worker-a exclusive", row, tok)
	}
	first, err := strconv.ParseFloat(strings.TrimSuffix(row.Remaining, "s"), 64)
	if err != nil || first <= 0 || first > 60 {
		t.Fatalf("remaining %q: want a time left within the 60s ttl", row.Remaining)
	}
	// The countdown: the same row later shows less time left.
	later := uiWait[string](b, "the remaining time to count down", fmt.Sprintf(`(() => { const r = %s;
		const v = r && parseFloat(r.children[4].textContent); return v < %v ? r.children[4].textContent : null; })()`, rowJS("jobs/a"), first))
	t.Logf("remaining %s, then %s", row.Remaining, later)
	// A lease of a session (no TTL of its own), for the Sessions view.
	c, err := client.New(srv.URL(), client.WithSessionTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := c.Acquire(ctx, "jobs/b", client.Owner("worker-b")); err != nil {
		t.Fatal(err)
	}
	uiWait[bool](b, "jobs/b", rowJS("jobs/b")+` !== null`)
	b.screenshot("locks")

	// The other views load from the OperatorService without an error.
	b.do(chromedp.Click(chromedp.CSS("#nav-sessions")))
	sessions := uiWait[string](b, "the sessions", `(() => { const t = document.getElementById('sessions-body').textContent; return t.includes('jobs/b') ? t : null; })()`)
	if !strings.Contains(sessions, "worker-b") {
		t.Errorf("sessions view %q lacks the session's owner", sessions)
	}
	b.screenshot("sessions")
	b.do(chromedp.Click(chromedp.CSS("#nav-cluster")))
	cluster := uiWait[string](b, "the cluster", `(() => { const t = document.getElementById('cluster-body').textContent; return t.includes('leader') ? t : null; })()`)
	if !strings.Contains(cluster, "healthy") {
		t.Errorf("cluster view %q: the node is not shown healthy", cluster)
	}
	b.screenshot("cluster")
	b.do(chromedp.Click(chromedp.CSS("#nav-activity")))
	uiWait[bool](b, "the charts", `document.querySelectorAll('#charts svg polyline').length >= 3`)
	b.screenshot("activity")
	if errs := b.errors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// The paused-worker story as the page tells it: A's token 1, B's token 2,
// B's write, and A's late write refused by the built-in store — the
// refused token beside the accepted one, in the story of the lock.
func TestUIStoryShowsAStaleWriteWithBothTokens(t *testing.T) {
	srv := startServer(t, "--ui=full")
	b := newUIBrowser(t)
	b.open(srv.URL(), "#/locks")
	b.follow("")

	cli := func(args ...string) string {
		t.Helper()
		out, stderr, code := runCLI(t, srv, args...)
		if code != 0 && code != 4 {
			t.Fatalf("fence %q: exit %d: %s", args, code, stderr)
		}
		return strings.TrimSpace(out + stderr)
	}
	a := field(t, cli("acquire", "sku-42", "--ttl", "60s", "--owner", "worker-a"), "token")
	cli("release", "sku-42", "--token", a)
	bt := field(t, cli("acquire", "sku-42", "--ttl", "60s", "--owner", "worker-b"), "token")
	cli("write", "stock/sku-42", "--token", bt, "--value", "8")
	if msg := cli("write", "stock/sku-42", "--token", a, "--value", "5"); !strings.Contains(msg, "STALE_TOKEN") {
		t.Fatalf("A's late write: %q, want STALE_TOKEN", msg)
	}
	// The lock's row links to its story.
	uiWait[bool](b, "the row of sku-42", rowJS("sku-42")+` !== null`)
	b.do(chromedp.Click(chromedp.CSS(`#locks-body tr.lock[data-name="sku-42"] a`)))
	want := "token " + a + " is older than accepted token " + bt
	got := uiWait[string](b, "the refusal in the story", fmt.Sprintf(`(() => {
		const li = document.querySelector('#story-list li.refused[data-refused="%s"][data-accepted="%s"]');
		return li ? li.textContent : null; })()`, a, bt))
	if !strings.Contains(got, want) {
		t.Fatalf("story line %q, want it to say %q", got, want)
	}
	story := uiEval[string](b, `document.getElementById('story-list').textContent`)
	for _, w := range []string{"token " + a + ` to "worker-a"`, "token " + bt + ` to "worker-b"`} {
		if !strings.Contains(story, w) {
			t.Errorf("story %q lacks the grant %q", story, w)
		}
	}
	b.screenshot("story")
	if errs := b.errors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// --ui=off serves nothing at /ui/; --ui=read serves the page without a
// release button, even to an admin (auth off: every caller is one), and
// every answer carries the CSP.
func TestUIModes(t *testing.T) {
	off := startServer(t, "--ui=off")
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui"} {
		resp, err := (&http.Client{Timeout: hangGuard, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(off.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("--ui=off: GET %s: %d, want 404", p, resp.StatusCode)
		}
	}

	read := startServer(t, "--ui=read")
	resp, err := (&http.Client{Timeout: hangGuard}).Get(read.URL() + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); resp.StatusCode != 200 || !strings.Contains(csp, "default-src 'self'") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("--ui=read: GET /ui/: %d, CSP %q, nosniff %q", resp.StatusCode, csp, resp.Header.Get("X-Content-Type-Options"))
	}
	b := newUIBrowser(t)
	b.open(read.URL(), "#/locks")
	b.follow("")
	if _, stderr, code := runCLI(t, read, "acquire", "r/a", "--ttl", "60s", "--owner", "w"); code != 0 {
		t.Fatal(stderr)
	}
	row := uiWait[uiRow](b, "the lock's row", fmt.Sprintf(`(%s)(%s)`, rowFields, rowJS("r/a")))
	if row.Release {
		t.Fatalf("--ui=read shows a release button: %+v", row)
	}
	if n := uiEval[int](b, `[...document.querySelectorAll('button')].filter((x) => x.offsetParent !== null && /release/i.test(x.textContent)).length`); n != 0 {
		t.Fatalf("--ui=read: %d visible release buttons", n)
	}
	if errs := b.errors(); len(errs) > 0 {
		t.Fatalf("console errors: %q", errs)
	}
}

// lockTokens asks LockService/Get for name: its holders' tokens.
func lockTokens(t *testing.T, url, bearer, name string) []uint64 {
	t.Helper()
	code, body := uiPost(t, url, "fence.v1.LockService/Get", bearer, map[string]any{"name": name})
	if code != 200 {
		t.Fatalf("Get %s: %d %v", name, code, body)
	}
	raw, _ := json.Marshal(body)
	var v struct {
		Lock struct {
			Holders []struct{ Token uint64 } `json:"holders"`
		} `json:"lock"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, l := range v.Lock.Holders {
		out = append(out, l.Token)
	}
	return out
}

// A lock name or owner with direction controls (a right-to-left override,
// U+202E) is shown with them as visible escapes: drawn as they are, an
// owner "evil\u202etxt.exe" reads "evilexe.txt", and a confirmation could
// seem to name another owner (an outside test's finding).
func TestUIShowsDirectionControlsVisibly(t *testing.T) {
	srv := startServer(t, "--ui=full")
	b := newUIBrowser(t)
	b.open(srv.URL(), "#/locks")
	b.follow("bidi/")
	name, owner := "bidi/a\u202ecod.exe", "worker\u202etxt.exe"
	if code, body := uiPost(t, srv.URL(), "fence.v1.LockService/Acquire", "", map[string]any{"name": name, "ttl": "600s", "owner": owner}); code != 200 {
		t.Fatalf("acquire: %d %v", code, body)
	}
	row := uiWait[uiRow](b, "the lock's row", fmt.Sprintf(`(%s)(%s)`, rowFields, rowJS(name)))
	if want := `worker\u202etxt.exe`; row.Owner != want {
		t.Errorf("owner shown as %q, want %q", row.Owner, want)
	}
	shown := uiEval[string](b, fmt.Sprintf(`%s.children[0].textContent`, rowJS(name)))
	if want := `bidi/a\u202ecod.exe`; shown != want {
		t.Errorf("name shown as %q, want %q", shown, want)
	}

	// A zero-width space in a name, a quote in an owner: the release
	// confirmation shows the one and cannot be given a token of its own
	// by the other (an outside test's second finding).
	name, owner = "bidi/b\u200b", `mallory" with token 999? (x`
	if code, body := uiPost(t, srv.URL(), "fence.v1.LockService/Acquire", "", map[string]any{"name": name, "ttl": "600s", "owner": owner}); code != 200 {
		t.Fatalf("acquire: %d %v", code, body)
	}
	tok := lockTokens(t, srv.URL(), "", name)
	if len(tok) != 1 {
		t.Fatalf("%q holders %v", name, tok)
	}
	uiWait[bool](b, "the row with its release button", fmt.Sprintf(`(() => { const r = (%s)(%s); return !!(r && r.Release); })()`, rowFields, rowJS(name)))
	uiEval[chromedp.Void](b, fmt.Sprintf(`%s.querySelector('td.act-col button').click()`, rowJS(name)))
	text := uiWait[string](b, "the confirmation", `document.getElementById('confirm').open && document.getElementById('confirm-text').textContent`)
	if want := fmt.Sprintf(`Release "bidi/b\u200b", held by "mallory\" with token 999? (x" with token %d?`, tok[0]); text != want {
		t.Errorf("confirmation %q, want %q", text, want)
	}
}
