//go:build e2e

package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// watchPage follows /v1/watch?prefix=br/ with the browser's EventSource
// and posts what it received to /report after each event.
const watchPage = `<!doctype html><title>watch</title><script>
const got = [];
const es = new EventSource('/v1/watch?prefix=br/');
function report() { fetch('/report', {method: 'POST', body: got.join('\n')}); }
es.addEventListener('state', e => { got.push('state ' + e.lastEventId); report(); });
es.addEventListener('change', e => {
  const d = JSON.parse(e.data);
  got.push(d.change.kind + ' ' + d.change.name + ' ' + d.change.token + ' ' + (typeof d.change.token) + ' ' + e.lastEventId);
  report();
});
</script>`

// A real browser (headless Chromium) follows GET /v1/watch with
// EventSource: the state, then each change with its token as a number;
// when the server ends the stream, EventSource reconnects by itself with
// Last-Event-ID and gets the changes since, without a state and without
// a gap.
func TestWatchSSEInChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is needed for this test (.ci/run installs it): ", err)
	}
	s, _ := startServerOnNode(t, Config{})
	var (
		mu       sync.Mutex
		reports  = make(chan string, 100)
		lastIDs  []string
		cutWatch context.CancelFunc
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, watchPage)
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reports <- string(b)
	})
	mux.HandleFunc("GET /v1/watch", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		cutWatch = cancel
		mu.Unlock()
		s.Handler().ServeHTTP(w, r.WithContext(ctx))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	defer hs.Close()

	cmd := exec.Command(browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "http://"+ln.Addr().String()+"/page")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the browser and the processes it started
		_ = cmd.Wait()
	}()
	// until waits for a report whose last line is want.
	until := func(what string, want func(last string) bool) []string {
		t.Helper()
		timeout := time.After(2 * time.Minute) // hang guard
		for {
			select {
			case r := <-reports:
				lines := strings.Split(r, "\n")
				if want(lines[len(lines)-1]) {
					return lines
				}
			case <-timeout:
				t.Fatalf("the browser did not report %s", what)
			}
		}
	}
	until("the state", func(l string) bool { return strings.HasPrefix(l, "state ") })
	tok := grantOn(t, s, "br/a")
	lines := until("the grant", func(l string) bool { return strings.HasPrefix(l, "granted ") })
	want := fmt.Sprintf("granted br/a %d number ", tok)
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, want) {
		t.Fatalf("the browser got %q; want %q and the position", last, want)
	}
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) != 5 {
		t.Fatalf("the browser's event %q has no id (lastEventId)", lines[len(lines)-1])
	}
	lastID := fields[4]
	// The server ends the stream; changes happen while the browser is away.
	mu.Lock()
	cutWatch()
	mu.Unlock()
	releaseOn(t, s, "br/a", tok)
	tok2 := grantOn(t, s, "br/b")
	lines = until("the changes after the reconnect", func(l string) bool { return strings.HasPrefix(l, "granted br/b") })
	got := strings.Join(lines, "\n")
	if strings.Count(got, "state ") != 1 || !strings.Contains(got, fmt.Sprintf("released br/a %d number", tok)) ||
		!strings.Contains(got, fmt.Sprintf("granted br/b %d number", tok2)) || strings.Count(got, "granted br/a") != 1 {
		t.Fatalf("the browser's events:\n%s\nwant one state, the grant, then after the reconnect the release and br/b's grant, once each", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lastIDs) < 2 || lastIDs[0] != "" || lastIDs[len(lastIDs)-1] != lastID {
		t.Fatalf("Last-Event-ID of the browser's requests: %q; want none, then %q", lastIDs, lastID)
	}
}
