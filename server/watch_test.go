//go:build e2e

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// grantOn acquires name on s's service for ttl and returns the token.
func grantOn(t *testing.T, s *Server, name string) fence.Token {
	t.Helper()
	l, err := s.Service().Acquire(context.Background(), fence.AcquireRequest{Name: name, Owner: "o", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return l.Lease.Token
}

func releaseOn(t *testing.T, s *Server, name string, tok fence.Token) {
	t.Helper()
	if _, err := s.Service().Release(context.Background(), fence.ReleaseRequest{Name: name, Token: tok}); err != nil {
		t.Fatal(err)
	}
}

// LockService.Watch over gRPC and over Connect with JSON: the state first,
// then each change with its position, in log order.
func TestWatchOverGRPCAndConnect(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	pre := grantOn(t, s, "w/pre")
	for _, proto := range []struct {
		name string
		opts []connect.ClientOption
	}{{"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"connect+json", []connect.ClientOption{connect.WithProtoJSON()}}} {
		t.Run(proto.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
			defer cancel()
			c := fencev1connect.NewLockServiceClient(h2cClient(), url, proto.opts...)
			st, err := c.Watch(ctx, connect.NewRequest(&fencev1.WatchRequest{Prefix: "w/"}))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if !st.Receive() {
				t.Fatal(st.Err())
			}
			first := st.Msg()
			if first.GetState() == nil || len(first.GetState().GetLocks()) != 1 || first.GetState().GetLocks()[0].GetHolders()[0].GetToken() != uint64(pre) {
				t.Fatalf("first message %v; want the state with w/pre held by token %d", first, pre)
			}
			tok := grantOn(t, s, "w/a")
			grantOn(t, s, "x/outside-"+proto.name)
			releaseOn(t, s, "w/a", tok)
			var got []string
			for len(got) < 2 && st.Receive() {
				ch := st.Msg().GetChange()
				got = append(got, fmt.Sprintf("%s %s %d", ch.GetKind(), ch.GetName(), ch.GetToken()))
			}
			want := []string{fmt.Sprintf("granted w/a %d", tok), fmt.Sprintf("released w/a %d", tok)}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("changes %v (%v); want %v", got, st.Err(), want)
			}
		})
	}
	// Name and prefix at once: refused naming name.
	c := fencev1connect.NewLockServiceClient(h2cClient(), url, connect.WithGRPC())
	st, err := c.Watch(context.Background(), connect.NewRequest(&fencev1.WatchRequest{Prefix: "w/", Name: "w/a"}))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
		st.Close()
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "name") {
		t.Fatalf("name and prefix: %v; want invalid_argument naming name", err)
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id, event, data string
}

// curlSSE runs `curl -N` on url with the headers and returns its events
// as they come, and a stop function.
func curlSSE(t *testing.T, url string, headers ...string) (<-chan sseEvent, func()) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed for this test: ", err)
	}
	args := []string{"-sS", "-N", url}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	cmd := exec.Command("curl", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	evs := make(chan sseEvent, 100)
	go func() {
		defer close(evs)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.event != "" || e.data != "" {
					evs <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data = line[6:]
			}
		}
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	return evs, stop
}

func nextSSE(t *testing.T, evs <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case e, ok := <-evs:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return e
	case <-time.After(time.Minute): // hang guard
		t.Fatal("no event within a minute")
	}
	return sseEvent{}
}

// GET /v1/watch with a real `curl -N`: the state as an event "state", each
// change as an event "change" with id: its position and data: the JSON
// contract's WatchEvent (the token a number); a second curl with the last
// id as Last-Event-ID (what a browser's EventSource sends when it
// reconnects) gets exactly the changes since, no state and no gap.
func TestWatchSSEWithCurl(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	evs, stop := curlSSE(t, url+"/v1/watch?prefix=sse/")
	if e := nextSSE(t, evs); e.event != "state" || !strings.Contains(e.data, `"state":{`) {
		t.Fatalf("first event %+v; want the state", e)
	}
	tok := grantOn(t, s, "sse/a")
	e := nextSSE(t, evs)
	var ev struct {
		Position string
		Index    uint64
		Change   struct {
			Kind  string
			Name  string
			Token json.Number
		}
	}
	if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
		t.Fatal(err)
	}
	if e.event != "change" || e.id != ev.Position || ev.Change.Kind != "granted" || ev.Change.Token.String() != fmt.Sprint(uint64(tok)) ||
		!strings.Contains(e.data, fmt.Sprintf(`"token":%d`, tok)) {
		t.Fatalf("event %+v; want change granted sse/a token %d as a number, id its position", e, tok)
	}
	stop()
	last := e.id
	releaseOn(t, s, "sse/a", tok)
	tok2 := grantOn(t, s, "sse/b")
	evs, _ = curlSSE(t, url+"/v1/watch?prefix=sse/", "Last-Event-ID: "+last)
	var got []string
	for len(got) < 2 {
		e := nextSSE(t, evs)
		if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s", e.event, ev.Change.Kind, ev.Change.Name, ev.Change.Token))
	}
	want := []string{fmt.Sprintf("change released sse/a %d", tok), fmt.Sprintf("change granted sse/b %d", tok2)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resumed after %s: %v; want %v", last, got, want)
	}
}

// Watch needs read permission on the whole prefix (or the name): a reader
// of jobs/ may watch jobs/ and jobs/x, not the prefix "" or "jo" (refused
// naming it) — nor may a locker without read; a revoked token's watch
// ends unauthenticated within the once-a-second check.
func TestWatchNeedsReadOnThePrefix(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	f := authFixtureOn(t, s, url)
	get := func(who, query string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/watch?"+query, nil)
		if a := f.creds[who]; a != "" {
			req.Header.Set("Authorization", a)
		}
		return http.DefaultClient.Do(req)
	}
	for _, c := range []struct {
		who, query string
		code       int
	}{
		{"read", "prefix=jobs/", 200}, {"read", "name=jobs/x", 200}, {"admin", "prefix=", 200},
		{"read", "prefix=", 403}, {"read", "prefix=jo", 403}, {"lock", "prefix=jobs/", 403}, {"none", "prefix=jobs/", 401},
	} {
		resp, err := get(c.who, c.query)
		if err != nil {
			t.Fatal(err)
		}
		var body string
		if c.code != 200 && resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			body = string(b)
		}
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Fatalf("%s watching %s: %d %s; want %d", c.who, c.query, resp.StatusCode, body, c.code)
		}
		if c.code == 403 && c.query != "prefix=" {
			prefix := strings.TrimPrefix(strings.TrimPrefix(c.query, "prefix="), "name=")
			if !strings.Contains(body, "permission") || !strings.Contains(body, fmt.Sprintf("%q", prefix)) {
				t.Fatalf("%s watching %s refused with %s; want it to name the permission and %q", c.who, c.query, body, prefix)
			}
		}
	}
	// A revoked token's open watch ends.
	out := f.must(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["reader"],"description":"soon revoked"}`)
	f.creds["soon"] = bearer(out["secret"].(string))
	evs, _ := curlSSE(t, url+"/v1/watch?prefix=jobs/", "Authorization: "+f.creds["soon"])
	if e := nextSSE(t, evs); e.event != "state" {
		t.Fatalf("first event %+v; want the state", e)
	}
	f.must(fencev1connect.AuthServiceRevokeTokenProcedure, f.creds["admin"], fmt.Sprintf(`{"id":%q}`, out["token"].(map[string]any)["id"].(string)))
	if e := nextSSE(t, evs); e.event != "error" || !strings.Contains(e.data, "unauthenticated") {
		t.Fatalf("after the revocation: %+v; want an event error, unauthenticated", e)
	}
	// A role's read permission revoked ends its holders' open watches too
	// (an outside test still got grants 13 s after the revoke).
	f.must(fencev1connect.AuthServiceGrantRoleProcedure, f.creds["admin"], `{"role":"brief","permissions":["read:jobs/"]}`)
	out = f.must(fencev1connect.AuthServiceCreateTokenProcedure, f.creds["admin"], `{"roles":["brief"],"description":"brief reader"}`)
	evs, _ = curlSSE(t, url+"/v1/watch?prefix=jobs/", "Authorization: "+bearer(out["secret"].(string)))
	if e := nextSSE(t, evs); e.event != "state" {
		t.Fatalf("first event %+v; want the state", e)
	}
	f.must(fencev1connect.AuthServiceRevokeRoleProcedure, f.creds["admin"], `{"role":"brief","permissions":["read:jobs/"]}`)
	if e := nextSSE(t, evs); e.event != "error" || !strings.Contains(e.data, "permission") {
		t.Fatalf("after the role's read was revoked: %+v; want an event error, permission denied", e)
	}
}

// A watcher that stops reading is cut (counted in fence_watch_cut_total)
// and every grant made meanwhile succeeds: the grants never wait for it.
func TestWatchStuckReaderIsCut(t *testing.T) {
	s, url := startServerOnNode(t, Config{WriteTimeout: 200 * time.Millisecond})
	// A client with a tiny receive buffer that sends the request and never
	// reads.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/watch?prefix=stuck/ HTTP/1.1\r\nHost: x\r\n\r\n")
	// Wait for the watch to be open (the gauge), by events of the server.
	awaitCond(t, "the stuck watch is open", func() bool { return s.watches.Load() == 1 })
	owner := strings.Repeat("o", fence.MaxOwnerBytes)
	cuts := func() float64 {
		n := 0.0
		for _, r := range []string{"send", "behind"} {
			var m dto.Metric
			if err := s.metrics.watchCuts.WithLabelValues(r).Write(&m); err != nil {
				t.Fatal(err)
			}
			n += m.GetCounter().GetValue()
		}
		return n
	}
	grants := 0
	for cuts() == 0 {
		if grants > 20000 {
			t.Fatalf("%d grants and the stuck watcher is not cut", grants)
		}
		l, err := s.Service().Acquire(context.Background(), fence.AcquireRequest{Name: fmt.Sprintf("stuck/%d", grants%8), Owner: owner, TTL: time.Minute})
		if err != nil {
			t.Fatalf("grant %d while a watcher is stuck: %v", grants, err)
		}
		releaseOn(t, s, l.Lease.Name, l.Lease.Token)
		grants++
	}
	awaitCond(t, "the cut watch is closed", func() bool { return s.watches.Load() == 0 })
	t.Logf("cut after %d grants", grants)
}

// awaitCond polls cond (a state of the server no channel reports) until it
// holds; a minute is a hang guard, not a timing assertion.
func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A watch's state lists every holder of a shared lock, and the built-in
// store's writes under the prefix come as changes "written" (with the
// version) and "refused" (with the token the resource accepted).
func TestWatchSharedHoldersAndStoreChanges(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	var toks []fence.Token
	for _, owner := range []string{"r1", "r2"} {
		g, err := s.Service().Acquire(ctx, fence.AcquireRequest{Name: "wh/a", Owner: owner, TTL: time.Minute, Mode: fence.Shared})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, g.Lease.Token)
	}
	c := fencev1connect.NewLockServiceClient(h2cClient(), url, connect.WithGRPC())
	st, err := c.Watch(ctx, connect.NewRequest(&fencev1.WatchRequest{Prefix: "wh/"}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	locks := st.Msg().GetState().GetLocks()
	if len(locks) != 1 || len(locks[0].GetHolders()) != 2 || locks[0].GetHolders()[0].GetToken() != uint64(toks[0]) ||
		locks[0].GetHolders()[1].GetToken() != uint64(toks[1]) || locks[0].GetHolders()[1].GetMode() != "shared" {
		t.Fatalf("state %v; want wh/a held shared by tokens %v", locks, toks)
	}
	if _, err := s.Service().Write(ctx, fence.WriteRequest{Resource: "wh/r", Token: toks[1], Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service().Write(ctx, fence.WriteRequest{Resource: "wh/r", Token: toks[0], Value: []byte("2")}); err == nil {
		t.Fatal("a write with the older token was accepted")
	}
	var got []string
	for len(got) < 2 && st.Receive() {
		ch := st.Msg().GetChange()
		got = append(got, fmt.Sprintf("%s %s %d v%d last%d", ch.GetKind(), ch.GetName(), ch.GetToken(), ch.GetVersion(), ch.GetLastAccepted()))
	}
	want := []string{fmt.Sprintf("written wh/r %d v1 last0", toks[1]), fmt.Sprintf("refused wh/r %d v0 last%d", toks[0], toks[1])}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes %v (%v); want %v", got, st.Err(), want)
	}
}

// Watches count toward the principal's watch quota (not its session
// stream quota, which is 1 here too): with a quota of 1, a reader's second
// watch is refused RESOURCE_EXHAUSTED naming the quota, and once the first
// ends a new one is served.
func TestWatchCountsTowardTheWatchQuota(t *testing.T) {
	s, url := startServerOnNode(t, Config{MaxWatchesPerPrincipal: 1, MaxStreamsPerPrincipal: 1})
	f := authFixtureOn(t, s, url)
	_, stop := curlSSE(t, url+"/v1/watch?prefix=jobs/", "Authorization: "+f.creds["read"])
	awaitCond(t, "the first watch is open", func() bool { return s.watches.Load() == 1 })
	get := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/watch?prefix=jobs/", nil)
		req.Header.Set("Authorization", f.creds["read"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		return resp.StatusCode, ""
	}
	if code, body := get(); code != http.StatusTooManyRequests || !strings.Contains(body, "max_watches_per_principal") {
		t.Fatalf("a second watch over the quota: %d %s; want 429 naming max_watches_per_principal", code, body)
	}
	stop()
	awaitCond(t, "the first watch is closed", func() bool { return s.watches.Load() == 0 })
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("a watch after the first ended: %d %s; want 200", code, body)
	}
}

// Watches have a budget of their own and an SSE watch's connection holds
// no slot of --max-conns: with --max-conns 3, five idle SSE watches (two
// principals) are open at once, a plain Acquire on a new connection is
// still served; one more watch of a principal at its quota is refused 429
// naming max_watches_per_principal, one more over --max-watches naming
// max_watches, and both refusals are counted.
func TestWatchesHaveTheirOwnBudgetAndHoldNoConnSlot(t *testing.T) {
	s, url := startServerOnNode(t, Config{MaxConns: 3, MaxWatches: 5, MaxWatchesPerPrincipal: 3})
	f := authFixtureOn(t, s, url)
	http.DefaultClient.CloseIdleConnections() // the fixture's connection gives its slot back
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	watch := func(who string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/watch?prefix=jobs/", nil)
		req.Header.Set("Authorization", f.creds[who])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("a watch of %s while %d watches are open: %v (its connection was never served?)", who, s.watches.Load(), err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		return resp.StatusCode, ""
	}
	for i := range 3 {
		_, stop := curlSSE(t, url+"/v1/watch?prefix=jobs/", "Authorization: "+f.creds["read"])
		defer stop()
		awaitCond(t, fmt.Sprintf("watch %d of read is open", i+1), func() bool { return s.watches.Load() == int64(i+1) })
	}
	if code, body := watch("read"); code != http.StatusTooManyRequests || !strings.Contains(body, "max_watches_per_principal") || !strings.Contains(body, "at most 3") {
		t.Fatalf("read's fourth watch: %d %s; want 429 naming max_watches_per_principal and its bound", code, body)
	}
	for i := range 2 {
		_, stop := curlSSE(t, url+"/v1/watch?prefix=jobs/", "Authorization: "+f.creds["readwrite"])
		defer stop()
		awaitCond(t, fmt.Sprintf("watch %d of readwrite is open", i+1), func() bool { return s.watches.Load() == int64(4+i) })
	}
	if code, body := watch("admin"); code != http.StatusTooManyRequests || !strings.Contains(body, "max_watches") || !strings.Contains(body, "at most 5") {
		t.Fatalf("a sixth watch: %d %s; want 429 naming max_watches and its bound", code, body)
	}
	// Five watch connections open against --max-conns 3: a plain call is
	// still served.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+fencev1connect.LockServiceAcquireProcedure, strings.NewReader(`{"name":"jobs/a","owner":"o","ttl":"60s"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", f.creds["lock"])
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("an Acquire while five watches are open: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an Acquire while five watches are open: %d %s", resp.StatusCode, b)
	}
	for _, limit := range []string{"max_watches", "max_watches_per_principal"} {
		var m dto.Metric
		if err := s.metrics.watchRefusals.WithLabelValues(limit).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != 1 {
			t.Fatalf("fence_watches_refused_total{limit=%s} = %v; want 1", limit, got)
		}
	}
}
