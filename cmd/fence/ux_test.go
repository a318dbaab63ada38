//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// TestHelpGoesToStdout: every way of asking for help prints the usage on
// stdout, nothing on stderr, and exits 0.
func TestHelpGoesToStdout(t *testing.T) {
	t.Setenv("FENCE_SERVER", "http://127.0.0.1:1")
	for _, args := range [][]string{
		{"--help"}, {"-h"}, {"help"}, {"help", "acquire"},
		{"acquire", "--help"}, {"acquire", "x", "-h"}, {"run", "-h"}, {"hold", "--help"}, {"delete", "-h"},
		{"locks", "-h"}, {"lab", "-h"}, {"serve", "--help"}, {"guard", "--help"}, {"guard", "max-token", "-h"},
	} {
		code, stdout, stderr := runCLI(args...)
		if code != exitOK || !strings.HasPrefix(stdout, "usage: fence") || stderr != "" {
			t.Errorf("fence %q: exit %d, stdout %.40q, stderr %q; want 0, the usage on stdout, nothing on stderr", args, code, stdout, stderr)
		}
	}
}

// TestTopUsageNamesGlobals: the top-level usage names the global flags,
// FENCE_SERVER, --version, every command and the exit codes.
func TestTopUsageNamesGlobals(t *testing.T) {
	_, stdout, _ := runCLI("--help")
	want := []string{"--server URL", "FENCE_SERVER", "--json", "--timeout D", "--help", "--version", "5 resource exhausted"}
	for name := range subcommands {
		want = append(want, "\n  "+name)
	}
	for _, w := range want {
		if !strings.Contains(stdout, w) {
			t.Errorf("top-level usage lacks %q", w)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	code, stdout, stderr := runCLI("--version")
	if code != exitOK || !strings.HasPrefix(stdout, "fence ") || stderr != "" {
		t.Fatalf("fence --version: exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	if _, v, _ := runCLI("version"); v != stdout {
		t.Errorf("fence version %q and fence --version %q differ", v, stdout)
	}
}

func TestDidYouMean(t *testing.T) {
	for typo, want := range map[string]string{"acuire": "acquire", "relase": "release", "lcoks": "locks", "hodl": "hold", "serv": "serve", "gaurd": "guard"} {
		code, _, stderr := runCLI(typo, "x")
		if code != exitUsage || !strings.Contains(stderr, fmt.Sprintf("did you mean %q?", want)) {
			t.Errorf("fence %s: exit %d stderr %q; want %d and a suggestion of %s", typo, code, stderr, exitUsage, want)
		}
	}
	if _, _, stderr := runCLI("frobnicate"); strings.Contains(stderr, "did you mean") {
		t.Errorf("fence frobnicate suggested something: %q", stderr)
	}
}

func TestDurationNeedsUnit(t *testing.T) {
	t.Setenv("FENCE_SERVER", "http://127.0.0.1:1")
	for _, args := range [][]string{
		{"acquire", "x", "--ttl", "30"}, {"run", "x", "--ttl", "5", "--", "true"}, {"hold", "x", "--wait", "2.5"},
		{"read", "x", "--timeout", "10"}, {"--timeout", "10", "read", "x"}, {"guard", "max-token", "--sqlite", "x", "--timeout", "3"},
		{"serve", "--max-ttl", "3600"}, // a flag of serve's own, defined with fs.Duration
	} {
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, "a duration needs a unit, e.g. 30s") {
			t.Errorf("fence %q: exit %d stderr %q; want %d and the unit hint", args, code, stderr, exitUsage)
		}
	}
	if _, _, stderr := runCLI("acquire", "x", "--ttl", "soon"); !strings.Contains(stderr, "not a duration") {
		t.Errorf("--ttl soon: stderr %q", stderr)
	}
}

func TestTokenRequired(t *testing.T) {
	t.Setenv("FENCE_SERVER", "http://127.0.0.1:1")
	for _, args := range [][]string{
		{"renew", "x"}, {"release", "x"}, {"write", "r", "--value", "v"}, {"add", "r", "--delta", "1"}, {"delete", "r"},
	} {
		code, _, stderr := runCLI(args...)
		if code != exitUsage || !strings.Contains(stderr, args[0]+": --token is required") {
			t.Errorf("fence %q: exit %d stderr %q; want %d and --token is required", args, code, stderr, exitUsage)
		}
	}
}

// TestUnreachableFailsFast: a server that refuses connections fails the
// command at once — long before its --timeout — naming the address and how
// to point the CLI elsewhere.
func TestUnreachableFailsFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("FENCE_SERVER", url)
	type res struct {
		code           int
		stdout, stderr string
	}
	done := make(chan res, 1)
	go func() {
		code, o, e := runCLI("read", "x", "--timeout", "1h")
		done <- res{code, o, e}
	}()
	var r res
	select {
	case r = <-done:
	case <-time.After(time.Minute): // a hang guard, not a timing assertion
		t.Fatal("fence read against a refusing address is still retrying after a minute (--timeout 1h)")
	}
	if r.code != exitError || !strings.Contains(r.stderr, "cannot reach the server at "+url) ||
		!strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "--server") || !strings.Contains(r.stderr, "FENCE_SERVER") {
		t.Fatalf("exit %d stderr %q; want 1, the address, the cause and the --server/FENCE_SERVER hint", r.code, r.stderr)
	}
}

// TestErrorJSONFieldNames: error facts in --json use the API's names.
func TestErrorJSONFieldNames(t *testing.T) {
	cases := []struct {
		err  error
		want []string
	}{
		{&fence.BusyError{Name: "x", Holder: "a", Token: 3, Remaining: 1500 * time.Millisecond},
			[]string{"delayed", "holder", "holderToken", "message", "name", "reason", "remaining", "waited"}},
		{&fence.UnknownTokenError{Token: 9, LastIssued: 4}, []string{"lastToken", "message", "reason", "token"}},
		{&fence.InvalidError{Field: "ttl", Bound: "at least 10ms", Value: "1ms"}, []string{"bound", "field", "got", "message", "reason"}},
		{&fence.SessionExpiredError{Session: 7}, []string{"message", "reason", "session"}},
		{&fence.ResourceExhaustedError{Limit: `waiters on lock "x"`, Bound: "at most 1024", Got: "1024"},
			[]string{"bound", "got", "limit", "message", "reason"}},
	}
	for _, tc := range cases {
		got := errorJSON(tc.err)
		keys := make([]string, 0, len(got))
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, tc.want) {
			t.Errorf("errorJSON(%T) keys %q, want %q", tc.err, keys, tc.want)
		}
	}
	if got := errorJSON(&fence.BusyError{Remaining: 1500 * time.Millisecond})["remaining"]; got != "1.500s" {
		t.Errorf("remaining %q, want the API's duration form 1.500s", got)
	}
	if got := errorJSON(&fence.ResourceExhaustedError{})["reason"]; got != "RESOURCE_EXHAUSTED" {
		t.Errorf("reason %q", got)
	}
}

func TestJSONDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 5 * time.Second: "5s", 250 * time.Millisecond: "0.250s", 90 * time.Second: "90s",
		1500 * time.Microsecond: "0.001500s", time.Nanosecond: "0.000000001s", -2 * time.Second: "-2s",
	} {
		if got := jsonDuration(d); got != want {
			t.Errorf("jsonDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// guard --help names fence restore --floor-from and says that a store
// where nothing is found is an error, not 0.
func TestGuardHelpNamesRestoreAndEmpty(t *testing.T) {
	_, stdout, _ := runCLI("guard", "--help")
	if !strings.Contains(stdout, "fence restore --floor-from") || !strings.Contains(stdout, "wrong table or prefix?") || !strings.Contains(stdout, "--allow-empty") {
		t.Fatalf("guard help does not name fence restore --floor-from, the nothing-found error and --allow-empty:\n%s", stdout)
	}
}

// jsonKeys decodes one JSON object and returns its keys, sorted.
func jsonKeys(t *testing.T, s string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not one JSON object: %q: %v", s, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestProcessJSONFieldNames: --json output uses the API's JSON field names
// and duration form; tokens are numbers.
func TestProcessJSONFieldNames(t *testing.T) {
	srv := startServe(t)
	a := fenceRun(t, srv.url, "acquire", "j", "--ttl", "90s", "--json", "--owner", "o").want(t, 0, "acquire")
	if k := jsonKeys(t, a.stdout); !slices.Equal(k, []string{"name", "owner", "requestId", "signedToken", "token", "ttl"}) {
		t.Errorf("acquire --json keys %q", k)
	}
	var lease struct {
		Token json.Number `json:"token"`
		TTL   string      `json:"ttl"`
	}
	json.Unmarshal([]byte(a.stdout), &lease)
	if lease.TTL != "90s" || strings.Contains(a.stdout, `"token":"`) {
		t.Errorf("acquire --json %s: want ttl 90s and a numeric token", a.stdout)
	}
	w := fenceRun(t, srv.url, "write", "jr", "--token", lease.Token.String(), "--value", "v", "--json").want(t, 0, "write")
	if k := jsonKeys(t, w.stdout); !slices.Equal(k, []string{"lastToken", "replayed", "resource", "text", "value", "version"}) {
		t.Errorf("write --json keys %q", k)
	}
	ls := fenceRun(t, srv.url, "locks", "--json").want(t, 0, "locks")
	var locks struct {
		Locks []map[string]json.RawMessage `json:"locks"`
	}
	if err := json.Unmarshal([]byte(ls.stdout), &locks); err != nil || len(locks.Locks) != 1 {
		t.Fatalf("locks --json %s: %v", ls.stdout, err)
	}
	for _, k := range []string{"name", "lease", "waiters", "lastToken"} {
		if _, ok := locks.Locks[0][k]; !ok {
			t.Errorf("locks --json lacks %q: %s", k, ls.stdout)
		}
	}
}

// TestProcessHold: fence hold keeps the lock past its TTL until SIGINT,
// then releases it and exits 0.
func TestProcessHold(t *testing.T) {
	srv := startServe(t)
	cmd := exec.Command(fenceBin, "hold", "h", "--ttl", "600ms", "--owner", "holder")
	cmd.Env = append(os.Environ(), "FENCE_SERVER="+srv.url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Lines are read to the end before Wait, which closes the pipe.
	lines := make(chan string, 10)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	var first string
	var ok bool
	select {
	case first, ok = <-lines:
	case <-time.After(procLimit):
		t.Fatalf("fence hold printed nothing within %s; stderr %q", procLimit, stderr.String())
	}
	if !ok || !strings.HasPrefix(first, "holding h token=") || !strings.Contains(first, "Ctrl-C") {
		t.Fatalf("fence hold printed %q; stderr %q", first, stderr.String())
	}
	tok := tokenOf(t, first)
	time.Sleep(1500 * time.Millisecond) // let 2.5 TTLs pass: only renewals keep it held
	busy := fenceRun(t, srv.url, "acquire", "h", "--ttl", "1s", "--json").want(t, exitBusy, "acquire while held")
	if !strings.Contains(busy.stdout, fmt.Sprintf(`"holderToken":%d`, tok)) {
		t.Fatalf("busy %s: want the holder's token %d", busy.stdout, tok)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case last := <-lines:
		if !strings.HasPrefix(last, "released h token=") {
			t.Fatalf("fence hold did not say it released: %q", last)
		}
	case <-time.After(procLimit):
		t.Fatalf("fence hold said nothing within %s of SIGINT", procLimit)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("fence hold after SIGINT: %v, want exit 0; stderr %q", err, stderr.String())
		}
	case <-time.After(procLimit):
		t.Fatalf("fence hold did not exit within %s of SIGINT", procLimit)
	}
	fenceRun(t, srv.url, "acquire", "h", "--ttl", "1s").want(t, 0, "acquire after hold released")
}

// TestProcessDeleteAndLocksPages: delete is fenced like write, replays by
// op-id; locks reads every page.
func TestProcessDeleteAndLocksPages(t *testing.T) {
	srv := startServe(t)
	var toks []uint64
	for i := range 5 {
		r := fenceRun(t, srv.url, "acquire", fmt.Sprintf("page-%d", i), "--ttl", "1m").want(t, 0, "acquire")
		toks = append(toks, tokenOf(t, r.stdout))
	}
	ls := fenceRun(t, srv.url, "locks", "page-", "--page-size", "2").want(t, 0, "locks paged")
	for i := range 5 {
		if !strings.Contains(ls.stdout, fmt.Sprintf("page-%d", i)) {
			t.Errorf("locks --page-size 2 lacks page-%d:\n%s", i, ls.stdout)
		}
	}
	old, cur := fmt.Sprint(toks[0]), fmt.Sprint(toks[4])
	fenceRun(t, srv.url, "write", "doc", "--token", cur, "--value", "v").want(t, 0, "write")
	stale := fenceRun(t, srv.url, "delete", "doc", "--token", old).want(t, exitRefused, "stale delete")
	if !strings.HasPrefix(stale.stderr, "STALE_TOKEN: ") {
		t.Fatalf("stale delete stderr %q", stale.stderr)
	}
	d := fenceRun(t, srv.url, "delete", "doc", "--token", cur, "--op-id", "del-1").want(t, 0, "delete")
	if !strings.HasPrefix(d.stdout, "deleted doc ") || !strings.Contains(d.stdout, "last_token="+cur) {
		t.Fatalf("delete printed %q", d.stdout)
	}
	again := fenceRun(t, srv.url, "delete", "doc", "--token", cur, "--op-id", "del-1").want(t, 0, "delete replay")
	if !strings.Contains(again.stdout, "replayed") {
		t.Fatalf("delete replay printed %q", again.stdout)
	}
	r := fenceRun(t, srv.url, "read", "doc").want(t, 0, "read")
	if !strings.Contains(r.stdout, `value=""`) || !strings.Contains(r.stdout, "last_token="+cur) || !strings.Contains(r.stdout, "(deleted)") {
		t.Fatalf("read after delete %q: want an empty value, the last token kept, and (deleted)", r.stdout)
	}
	rj := fenceRun(t, srv.url, "--json", "read", "doc").want(t, 0, "read --json")
	if !strings.Contains(rj.stdout, `"deleted":true`) {
		t.Fatalf("read --json after delete %q: want \"deleted\":true as the API says", rj.stdout)
	}
	fenceRun(t, srv.url, "write", "doc", "--token", old, "--value", "late").want(t, exitRefused, "stale write after delete")
}

// limitServer answers every Write with the server's RESOURCE_EXHAUSTED
// refusal (as api/apierr encodes it) and counts the attempts.
type limitServer struct {
	fencev1connect.UnimplementedResourceServiceHandler
	calls atomic.Int32
}

func (s *limitServer) Write(context.Context, *connect.Request[fencev1.WriteRequest]) (*connect.Response[fencev1.WriteResponse], error) {
	s.calls.Add(1)
	return nil, apierr.ToConnect(&fence.ResourceExhaustedError{Limit: "fenced resources", Bound: "at most 1"})
}

// TestResourceExhaustedExit5: a server limit is reported as
// RESOURCE_EXHAUSTED with exit code 5, naming the limit, after one attempt.
func TestResourceExhaustedExit5(t *testing.T) {
	ls := &limitServer{}
	mux := http.NewServeMux()
	mux.Handle(fencev1connect.NewResourceServiceHandler(ls))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	code, stdout, stderr := runCLI("--server", srv.URL, "write", "r2", "--token", "1", "--value", "v", "--json")
	if code != exitLimit || !strings.HasPrefix(stderr, "RESOURCE_EXHAUSTED: ") || !strings.Contains(stderr, "fenced resources: at most 1") {
		t.Fatalf("exit %d stderr %q: want %d and RESOURCE_EXHAUSTED naming the limit", code, stderr, exitLimit)
	}
	var out struct {
		Error struct {
			Reason string `json:"reason"`
			Limit  string `json:"limit"`
			Bound  string `json:"bound"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || out.Error.Reason != "RESOURCE_EXHAUSTED" ||
		out.Error.Limit != "fenced resources" || out.Error.Bound != "at most 1" {
		t.Fatalf("json %s: %+v %v", stdout, out, err)
	}
	if n := ls.calls.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1: a limit is not retried", n)
	}
}
