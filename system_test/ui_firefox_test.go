//go:build e2e

package system_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The operator page loads in Firefox (Debian's firefox-esr, headless; .ci/run
// installs it), runs its script and follows the live watch: a recording
// reverse proxy in front of a real `fence serve --ui=read` sees, from a
// Firefox User-Agent, GET /ui/app.js, POST OperatorService/WhoAmI and GET
// /v1/watch answered 200 with its first bytes streamed to the browser.
// A smoke test only: it reads no console and clicks nothing (the chromedp
// tests do that in Chromium).
func TestUILoadsAndFollowsTheWatchInFirefox(t *testing.T) {
	path, err := exec.LookPath("firefox-esr")
	if err != nil {
		t.Fatal("firefox-esr is needed for the operator page's Firefox test (.ci/run installs it): ", err)
	}
	srv := startServer(t, "--ui=read")
	if _, stderr, code := runCLI(t, srv, "acquire", "ff/a", "--ttl", "600s"); code != 0 {
		t.Fatalf("fence acquire ff/a: exit %d: %s", code, stderr)
	}

	upstream, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan firefoxHit, 64)
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.FlushInterval = -1 // the watch is a stream: pass every byte on at once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &recordingWriter{ResponseWriter: w, hit: firefoxHit{Method: r.Method, Path: r.URL.Path, UA: r.UserAgent()}, seen: seen}
		rp.ServeHTTP(rw, r)
		rw.report() // an answer with no body (or a refusal) is still seen
	}))
	t.Cleanup(func() { proxy.CloseClientConnections(); proxy.Close() })

	profile := t.TempDir()
	// Keep the browser off the network beyond the proxy and quiet at start.
	prefs := strings.Join([]string{
		`user_pref("browser.shell.checkDefaultBrowser", false);`,
		`user_pref("app.update.enabled", false);`,
		`user_pref("network.captive-portal-service.enabled", false);`,
		`user_pref("network.connectivity-service.enabled", false);`,
		`user_pref("datareporting.policy.dataSubmissionEnabled", false);`,
		`user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);`,
		`user_pref("browser.aboutwelcome.enabled", false);`,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(prefs), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--new-instance", "--profile", profile, proxy.URL+"/ui/#/locks")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "MOZ_CRASHREPORTER_DISABLE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Firefox starts children: kill them all
	if err := cmd.Start(); err != nil {
		t.Fatal("start firefox-esr: ", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck // killed on purpose
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // gone already is fine
		select {
		case <-exited:
		case <-time.After(hangGuard):
			t.Errorf("firefox-esr did not exit %v after SIGKILL", hangGuard)
		}
		if t.Failed() {
			t.Logf("firefox-esr output:\n%s", out.String())
		}
	})

	want := map[string]bool{
		"GET /ui/app.js":                        false,
		"POST /fence.v1.OperatorService/WhoAmI": false,
		"GET /v1/watch":                         false,
	}
	var log []string
	guard := time.After(hangGuard)
	for missing := len(want); missing > 0; {
		select {
		case h := <-seen:
			log = append(log, h.String())
			key := h.Method + " " + h.Path
			done, ok := want[key]
			if !ok || done || h.Status != http.StatusOK || !strings.Contains(h.UA, "Firefox/") {
				continue
			}
			if key == "GET /v1/watch" && h.Bytes == 0 {
				continue
			}
			want[key] = true
			missing--
		case <-exited:
			t.Fatalf("firefox-esr exited before the page followed the watch; the proxy saw:\n%s", strings.Join(log, "\n"))
		case <-guard:
			var not []string
			for k, done := range want {
				if !done {
					not = append(not, k)
				}
			}
			t.Fatalf("within %v the proxy did not see %q answered 200 to Firefox; it saw:\n%s", hangGuard, not, strings.Join(log, "\n"))
		}
	}
}

// firefoxHit is one request the proxy passed on and what it answered.
type firefoxHit struct {
	Method, Path, UA string
	Status           int
	Bytes            int // body bytes passed to the browser when reported
}

func (h firefoxHit) String() string {
	return h.Method + " " + h.Path + " " + http.StatusText(h.Status) + " (" + itoa(uint64(h.Bytes)) + " bytes) UA " + h.UA
}

// recordingWriter reports its request once: when its first body bytes are
// flushed to the browser (so a stream that never ends is seen), or when the answer ends without any.
type recordingWriter struct {
	http.ResponseWriter
	hit  firefoxHit
	seen chan<- firefoxHit
	once sync.Once
}

func (w *recordingWriter) WriteHeader(code int) {
	w.hit.Status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.hit.Status == 0 {
		w.hit.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.hit.Bytes += n
	return n, err
}

// Flush passes the bytes written on to the browser (the proxy flushes after
// every write) and then reports them.
func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	if w.hit.Bytes > 0 {
		w.report()
	}
}

func (w *recordingWriter) report() {
	w.once.Do(func() {
		select {
		case w.seen <- w.hit:
		default: // the test stopped reading; it has failed or passed already
		}
	})
}
