//go:build e2e

package system_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The operator page's tests drive Debian's chromium (.ci/run installs it)
// through the DevTools protocol with chromedp, against real `fence serve`
// processes. No test sleeps: each waits for a condition in the page
// (chromedp.Poll, polled in the page's animation frames) under hangGuard.

// uiBrowser is one headless Chromium tab and every console message,
// uncaught exception and browser-log entry the page produced.
type uiBrowser struct {
	t   testing.TB
	ctx context.Context

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
}

// newUIBrowser starts Chromium (one per test: its own profile, so its own
// sessionStorage) with a 1280x800 window.
func newUIBrowser(t testing.TB) *uiBrowser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for the operator page's tests (.ci/run installs it): ", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 800),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &uiBrowser{t: t, ctx: ctx}
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal("start chromium: ", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// errors are the messages of type error or exception so far.
func (b *uiBrowser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.messages {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			out = append(out, fmt.Sprintf("%s (%s %s:%d)", m, m.Source, m.URL, m.Line))
		}
	}
	return out
}

// do runs steps under hangGuard.
func (b *uiBrowser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, hangGuard)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v; console: %q", err, b.errors())
	}
}

// eval evaluates a JavaScript expression (promises awaited) into T.
func uiEval[T any](b *uiBrowser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, hangGuard)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v; console: %q", expr, err, b.errors())
	}
	return v
}

// waitFor polls the JavaScript expression in the page until it is truthy,
// returning its value, or fails the test after hangGuard naming what.
func uiWait[T any](b *uiBrowser, what, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, hangGuard+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(hangGuard)))
	if err != nil {
		status := uiEvalSafe(b, `document.getElementById('locks-status').textContent + ' | ' + document.getElementById('banner').textContent`)
		b.t.Fatalf("waiting for %s (%s): %v; page status %q; console: %q", what, expr, err, status, b.errors())
	}
	return v
}

func uiEvalSafe(b *uiBrowser, expr string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		return err.Error()
	}
	return v
}

// open loads the page at srvURL/ui/ + fragment and waits until it follows
// its prefix live (or shows the login form, when login).
func (b *uiBrowser) open(srvURL, fragment string) {
	b.t.Helper()
	b.do(chromedp.Navigate(srvURL + "/ui/" + fragment))
}

// login types token into the page's login form.
func (b *uiBrowser) login(token string) {
	b.t.Helper()
	uiWait[bool](b, "the login form", `!document.getElementById('login').hidden`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), token), chromedp.Click(chromedp.CSS("#login-form button")))
}

// follow makes the page follow prefix and waits until it is live or
// refused.
func (b *uiBrowser) follow(prefix string) {
	b.t.Helper()
	uiEval[chromedp.Void](b, fmt.Sprintf(`(() => { const i = document.getElementById('prefix-input'); i.value = %q;
		document.getElementById('prefix-form').requestSubmit(); })()`, prefix))
	// The status names the prefix it is about: a status left by the
	// prefix followed before (its refusal, say) is not this one's.
	named := `every lock`
	if prefix != "" {
		named = fmt.Sprintf(`prefix "%s"`, prefix)
	}
	uiWait[bool](b, "the page to follow "+prefix, fmt.Sprintf(`(() => { const s = document.getElementById('locks-status').textContent;
		return s.startsWith('Following ' + %[1]q + ':') && s.includes(', live') || s.startsWith('Not following ' + %[1]q + ':'); })()`, named))
}

// rowJS is a JavaScript expression: the row of lock name in the table, or
// null.
func rowJS(name string) string {
	return fmt.Sprintf(`([...document.querySelectorAll("#locks-body tr.lock")].find((r) => r.dataset.name === %q) || null)`, name)
}

// uiRow is a row of the locks table as the page shows it.
type uiRow struct {
	Name, Mode, Owner, Token, Remaining, Waiters string
	Release                                      bool // a visible release button
}

const rowFields = `(r) => r && ({Name: r.dataset.name, Mode: r.children[1].textContent, Owner: r.children[2].textContent,
	Token: r.children[3].textContent, Remaining: r.children[4].textContent, Waiters: r.children[5].textContent,
	Release: !r.children[6].firstChild.hidden && getComputedStyle(r.children[6]).display !== 'none'})`

// screenshot writes the page as docs/ui/NAME.png when FENCE_UI_SCREENSHOTS
// is set (make ui-screenshots): the pictures in docs/operations.md are the
// test's, refreshed on purpose, so an ordinary `make test` leaves git clean.
func (b *uiBrowser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("FENCE_UI_SCREENSHOTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, hangGuard)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal("screenshot: ", err)
	}
	dir := filepath.Join(moduleRoot(b.t), "docs", "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote docs/ui/%s.png", name)
}

// uiPost calls a unary procedure with a JSON body as the page does.
func uiPost(t testing.TB, url, proc, bearer string, req any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(req)
	r, err := http.NewRequest(http.MethodPost, url+"/"+proc, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := (&http.Client{Timeout: hangGuard}).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s: %d %s", proc, resp.StatusCode, strings.TrimSpace(string(b)))
		}
	}
	return resp.StatusCode, out
}
