//go:build e2e

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Every flag of `fence serve` (but the globals) has a FENCE_ variable:
// walking serve's own flag set, each variable set alone sets its flag; the
// variable is named in --help; none takes a name with another meaning. A
// flag added without a variable fails here.
func TestServeEveryFlagHasAnEnvVar(t *testing.T) {
	fs, _ := serveFlags(&globals{}, io.Discard)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if !hasEnv(f) {
			if !noEnv[f.Name] {
				t.Errorf("--%s has no variable", f.Name)
			}
			return
		}
		n++
		name := envName(f.Name)
		if slices.Contains(reservedEnv, name) || strings.HasPrefix(name, reservedEnvPrefix) {
			t.Errorf("--%s takes %s, a variable with another meaning", f.Name, name)
		}
		if !strings.Contains(f.Usage, "(env "+name+")") {
			t.Errorf("--%s: usage %q does not name %s", f.Name, f.Usage, name)
		}
		v := testValue(t, f)
		fs2, _ := serveFlags(&globals{}, io.Discard)
		src, err := parseServe(fs2, nil, func(k string) string {
			if k == name {
				return v
			}
			return ""
		})
		if err != nil {
			t.Errorf("%s=%s: %v", name, v, err)
			return
		}
		want := fs2.Lookup(f.Name)
		if got := want.Value.String(); got != normalized(t, f, v) || src[f.Name] != name+"="+v {
			t.Errorf("%s=%s: --%s is %q (recorded %q), want %q", name, v, f.Name, got, src[f.Name], normalized(t, f, v))
		}
	})
	if n < 30 {
		t.Fatalf("only %d flags with a variable: is this serve's flag set?", n)
	}
	// --help (a real run) names every variable with a default where the
	// flag has one.
	code, stdout, _ := runCLI("serve", "--help")
	fs.VisitAll(func(f *flag.Flag) {
		if hasEnv(f) && (code != exitOK || !strings.Contains(stdout, "(env "+envName(f.Name)+")")) {
			t.Errorf("fence serve --help (exit %d) does not name %s", code, envName(f.Name))
		}
	})
	for _, want := range []string{"(env FENCE_MAX_TTL) (default 24h0m0s)", "(env FENCE_LOG_FORMAT) (default text)", "(env FENCE_LOG_LEVEL) (default info)", "A flag on the command\nline wins"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("fence serve --help lacks %q", want)
		}
	}
}

// A variable applies when its flag is not given; the flag wins when it
// is; an empty variable is unset.
func TestServeEnvAppliesFlagWins(t *testing.T) {
	parse := func(env map[string]string, args ...string) *serveSettings {
		t.Helper()
		fs, o := serveFlags(&globals{}, io.Discard)
		if _, err := parseServe(fs, args, func(k string) string { return env[k] }); err != nil {
			t.Fatalf("%v %q: %v", env, args, err)
		}
		return o
	}
	env := map[string]string{"FENCE_MAX_TTL": "2m", "FENCE_LOG_FORMAT": "json", "FENCE_RAFT_ADDR": "127.0.0.1:9", "FENCE_BOOTSTRAP": "true", "FENCE_LISTEN": ""}
	o := parse(env)
	if o.cfg.Rules.MaxTTL != 2*time.Minute || o.logFormat != "json" || o.cf.raftAddr != "127.0.0.1:9" || !o.cf.bootstrap || o.cfg.Listen != "127.0.0.1:7420" {
		t.Errorf("from env: max-ttl %s, log-format %s, raft-addr %q, bootstrap %v, listen %q", o.cfg.Rules.MaxTTL, o.logFormat, o.cf.raftAddr, o.cf.bootstrap, o.cfg.Listen)
	}
	o = parse(env, "--max-ttl", "3m", "--log-format=text", "--raft-addr", "127.0.0.1:8", "--bootstrap=false")
	if o.cfg.Rules.MaxTTL != 3*time.Minute || o.logFormat != "text" || o.cf.raftAddr != "127.0.0.1:8" || o.cf.bootstrap {
		t.Errorf("flags over env: max-ttl %s, log-format %s, raft-addr %q, bootstrap %v", o.cfg.Rules.MaxTTL, o.logFormat, o.cf.raftAddr, o.cf.bootstrap)
	}
}

// A variable whose value its flag refuses stops the start with a usage
// error (exit 2) naming the variable; so does a value a later check
// refuses (it names the flag and says which variable set it).
func TestServeBadEnvNamesTheVariable(t *testing.T) {
	cases := []struct {
		env  []string
		args []string
		want []string
	}{
		{[]string{"FENCE_MAX_TTL=5"}, nil, []string{`FENCE_MAX_TTL="5"`, "--max-ttl", "needs a unit"}},
		{[]string{"FENCE_MAX_TTL=100000000h"}, nil, []string{`FENCE_MAX_TTL="100000000h"`, "--max-ttl", "out of range"}},
		{[]string{"FENCE_RAFT_ADDR=127.0.0.1:99999", "FENCE_BOOTSTRAP=true"}, nil, []string{"--raft-addr", "port 0-65535", "FENCE_RAFT_ADDR=127.0.0.1:99999"}},
		{[]string{"FENCE_RAFT_ADDR=127.0.0.1:0", "FENCE_BOOTSTRAP=true"}, nil, []string{"--raft-addr", "not 0", "FENCE_RAFT_ADDR=127.0.0.1:0"}},
		{[]string{"FENCE_BOOTSTRAP=maybe"}, nil, []string{`FENCE_BOOTSTRAP="maybe"`, "--bootstrap"}},
		{[]string{"FENCE_MAX_CONNS=many"}, nil, []string{`FENCE_MAX_CONNS="many"`, "--max-conns"}},
		{[]string{"FENCE_LOG_LEVEL=loud"}, nil, []string{`FENCE_LOG_LEVEL="loud"`, "--log-level", "info, debug, warn, error"}},
		{[]string{"FENCE_LOG_FORMAT=xml"}, nil, []string{`FENCE_LOG_FORMAT="xml"`, "text, json"}},
		{[]string{"FENCE_MAX_TTL=1ms"}, nil, []string{"--max-ttl must be at least", "--max-ttl is FENCE_MAX_TTL=1ms"}},
		{[]string{"FENCE_MAX_CONNS=0"}, nil, []string{"--max-conns must be at least 1", "FENCE_MAX_CONNS=0"}},
		{[]string{"FENCE_BOOTSTRAP=1"}, nil, []string{"--bootstrap needs --raft-addr", "--bootstrap is FENCE_BOOTSTRAP=1"}},
		{[]string{"FENCE_HEARTBEAT_TIMEOUT=1ms"}, nil, []string{"--heartbeat-timeout", "FENCE_HEARTBEAT_TIMEOUT=1ms"}},
		{[]string{"FENCE_MAX_SESSIONS=-1"}, nil, []string{"--max-sessions", "FENCE_MAX_SESSIONS=-1"}},
		{[]string{"FENCE_LOG_STORE=bolt"}, nil, []string{`--log-store must be "wal"`, "FENCE_LOG_STORE=bolt"}},
		// A bound set by another flag names that flag and its variable.
		{[]string{"FENCE_ID_RETENTION=1m"}, nil, []string{"--min-id-retention must be between 0s and --id-retention (1m0s)", "--id-retention is FENCE_ID_RETENTION=1m"}},
	}
	for _, tc := range cases {
		code, stderr := serveExit(t, tc.env, tc.args...)
		for _, w := range tc.want {
			if code != exitUsage || !strings.Contains(stderr, w) {
				t.Errorf("fence serve (env %q): exit %d, stderr %q; want %d with %q", tc.env, code, stderr, exitUsage, w)
			}
		}
	}
	// A flag on the command line is its own: no variable is blamed.
	code, stderr := serveExit(t, []string{"FENCE_MAX_TTL=1ms"}, "--max-ttl", "2ms")
	if code != exitUsage || strings.Contains(stderr, "FENCE_MAX_TTL") {
		t.Errorf("--max-ttl 2ms with FENCE_MAX_TTL=1ms: exit %d, stderr %q; want %d not naming the variable", code, stderr, exitUsage)
	}
}

// jsonLines reads sc's lines, each a JSON object, until the server logs
// that it serves; it fails the test on a line that is not JSON.
func jsonLines(t *testing.T, sc *bufio.Scanner, until string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("log line without %q: %q", k, sc.Text())
			}
		}
		out = append(out, m)
		if s, _ := m["msg"].(string); strings.HasPrefix(s, until) {
			return out
		}
	}
	t.Fatalf("output ended before %q; lines: %v", until, out)
	return nil
}

// `fence serve --log-format json` (the real binary) writes only JSON
// objects, one a line: its start, a leader change with the term, and at
// --log-level debug a refused request. FENCE_LOG_FORMAT does the same;
// --log-format text on the command line wins over it. A refused start is
// one JSON line with the reason.
func TestProcessServeLogFormatJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, fenceBin, "serve", "--listen", "127.0.0.1:0", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "FENCE_LOG_FORMAT=json", "FENCE_DATA_DIR="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	sc := bufio.NewScanner(stderr)
	lines := jsonLines(t, sc, "fence serving on ")
	url := strings.TrimPrefix(lines[len(lines)-1]["msg"].(string), "fence serving on ")
	if got := lines[len(lines)-1]["data_dir"]; got != dir {
		t.Errorf("data_dir %v, want FENCE_DATA_DIR's %s", got, dir)
	}
	var leader map[string]any
	for _, l := range lines {
		if l["msg"] == "leader changed" {
			leader = l
		}
	}
	if leader == nil || leader["node_id"] != "fence-1" || leader["leader_id"] != "fence-1" || leader["role"] != "leader" || leader["term"] == nil || leader["term"].(float64) < 1 {
		t.Errorf("leader line %v, want fence-1 leading in a term", leader)
	}
	// Durations as the text log writes them: "took office" server_time.
	var office map[string]any
	for _, l := range lines {
		if l["msg"] == "took office" {
			office = l
		}
	}
	if st, ok := office["server_time"].(string); !ok || st != "0s" {
		t.Errorf("took office line %v: want server_time \"0s\" (a duration as text)", office)
	}
	// A refused request, at debug.
	fenceRun(t, url, "acquire", "x", "--ttl", "1m").want(t, exitOK, "acquire")
	fenceRun(t, url, "acquire", "x", "--ttl", "1m").want(t, exitBusy, "second acquire")
	refused := jsonLines(t, sc, "request refused")
	if r := refused[len(refused)-1]; r["level"] != "DEBUG" || r["reason"] != "BUSY" || !strings.Contains(fmt.Sprint(r["procedure"]), "Acquire") {
		t.Errorf("refusal line %v, want DEBUG BUSY of an Acquire", r)
	}

	// The same data dir again while it runs: refused, one JSON line.
	code, out := serveExit(t, []string{"FENCE_LOG_FORMAT=json"}, "--data-dir", dir)
	lines = nil
	for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("refused start: line %q is not JSON: %v", l, err)
		}
		lines = append(lines, m)
	}
	if last := lines[len(lines)-1]; code == exitOK || last["msg"] != "start refused" || last["level"] != "ERROR" || last["err"] == "" {
		t.Errorf("second serve on the same dir: exit %d, last line %v; want non-zero and 'start refused' with the reason", code, last)
	}
	// A bad setting with a JSON log: one JSON line too, exit 2.
	code, out = serveExit(t, []string{"FENCE_LOG_FORMAT=json", "FENCE_MAX_TTL=1ms"})
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil || code != exitUsage || m["msg"] != "start refused" || !strings.Contains(fmt.Sprint(m["err"]), "FENCE_MAX_TTL=1ms") {
		t.Errorf("FENCE_MAX_TTL=1ms with a JSON log: exit %d, output %q (%v); want %d and one JSON line naming the variable", code, out, err, exitUsage)
	}
	// --log-format text wins over FENCE_LOG_FORMAT=json.
	code, out = serveExit(t, []string{"FENCE_LOG_FORMAT=json"}, "--data-dir", dir, "--log-format", "text")
	if code == exitOK || !strings.HasPrefix(out, "time=") || !strings.Contains(out, `msg="start refused"`) {
		t.Errorf("--log-format text over FENCE_LOG_FORMAT=json: exit %d, output %q; want text lines", code, out)
	}
}

// A FENCE_ variable no serve flag reads is reported with the nearest real
// name (a typo would otherwise be ignored in silence); the variables with
// another meaning are not.
func TestServeUnknownEnv(t *testing.T) {
	fs, _ := serveFlags(&globals{}, io.Discard)
	got := unknownEnv(fs, []string{"FENCE_MAXTTL=1h", "FENCE_WHATEVER=1", "FENCE_MAX_TTL=1h", "FENCE_SERVER=http://x", "FENCE_LOCK=a",
		"FENCE_TOKEN=1", "FENCE_SIGNED_TOKEN=1", "FENCE_LOCKS=[]", "FENCE_PROOFS=[]", "FENCE_PLANTBUG=x", "FENCE_TEST_CLOCK_RATE=1", "FENCE_TEST_POSTGRES=x", "PATH=/bin", "FENCE_LOG_LEVEL=debug"})
	want := [][2]string{{"FENCE_MAXTTL", "FENCE_MAX_TTL"}, {"FENCE_WHATEVER", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("unknownEnv = %q, want %q", got, want)
	}
}

// serve's JSON log writes a time.Duration as the text log does ("10s"),
// at the top level, in a group and given as any; other values as slog does.
func TestServeJSONLogDurations(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "json", "info", new(atomic.Bool))
	log.Info("x", "timeout", 10*time.Second, slog.Group("g", "d", 250*time.Millisecond), slog.Any("a", 90*time.Minute), "n", 7)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	g, _ := m["g"].(map[string]any)
	if m["timeout"] != "10s" || g["d"] != "250ms" || m["a"] != "1h30m0s" || m["n"] != float64(7) {
		t.Fatalf("line %s: want timeout \"10s\", g.d \"250ms\", a \"1h30m0s\", n 7", buf.String())
	}
}
