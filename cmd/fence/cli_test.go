//go:build e2e

package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

func TestParseArgsInterspersed(t *testing.T) {
	g := &globals{}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs)
	ttl := fs.Duration("ttl", 0, "")
	pos, after, err := parseArgs(fs, []string{"NAME", "--ttl", "5s", "--json", "--server", "http://h:1", "--", "sh", "-c", "--ttl"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"NAME"}) || !slices.Equal(after, []string{"sh", "-c", "--ttl"}) {
		t.Fatalf("pos %q after %q", pos, after)
	}
	if ttl.String() != "5s" || !g.json || g.server != "http://h:1" {
		t.Fatalf("flags: ttl %s json %v server %q", ttl, g.json, g.server)
	}
}

// runCLI runs the CLI in process.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageExitCodes(t *testing.T) {
	t.Setenv("FENCE_SERVER", "http://127.0.0.1:1") // nothing listens there
	cases := []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"--bogus", "acquire"}, exitUsage},
		{[]string{"acquire"}, exitUsage},                          // no NAME
		{[]string{"acquire", "x"}, exitUsage},                     // no --ttl
		{[]string{"acquire", "x", "--ttl", "soon"}, exitUsage},    // not a duration
		{[]string{"acquire", "x", "--ttl", "1ms"}, exitUsage},     // below MinTTL: INVALID_ARGUMENT
		{[]string{"acquire", "a", "a", "--ttl", "1s"}, exitUsage}, // a set naming a lock twice: INVALID_ARGUMENT
		{[]string{"acquire", "a", "--ttl", "1s", "--permits", "1025"}, exitUsage},
		{[]string{"acquire", "a", "--ttl", "1s", "--permits", "-1"}, exitUsage},
		{[]string{"acquire", "a", "--ttl", "1s", "--shared", "--permits", "2"}, exitUsage}, // shared with permits: INVALID_ARGUMENT
		{[]string{"hold", "--shared"}, exitUsage},                                          // no NAME
		{[]string{"write", "r", "--token", "0", "--value", "v"}, exitUsage},                // token 0: INVALID_ARGUMENT
		{[]string{"write", "r", "--token", "-1"}, exitUsage},                               // not a uint
		{[]string{"add", "r", "--token", "1", "--delta", "x"}, exitUsage},
		{[]string{"run", "x", "--ttl", "1s"}, exitUsage},          // no command
		{[]string{"run", "--ttl", "1s", "--", "true"}, exitUsage}, // no NAME before --
		{[]string{"lab", "--unit", "1ms"}, exitUsage},
		{[]string{"serve", "--max-ttl", "1ms"}, exitUsage},
		{[]string{"read", "r", "--timeout", "200ms"}, exitError}, // server unreachable
		{[]string{"version"}, exitOK},
		{[]string{"help"}, exitOK},
		{[]string{"acquire", "-h"}, exitOK},
	}
	for _, tc := range cases {
		if code, _, stderr := runCLI(tc.args...); code != tc.want {
			t.Errorf("fence %q: exit %d, want %d (stderr %q)", tc.args, code, tc.want, stderr)
		}
	}
}

// TestRequiredFlagsNamed: a required flag left out is named as missing, and
// one given a zero value is refused by its bound, not reported as missing.
func TestRequiredFlagsNamed(t *testing.T) {
	t.Setenv("FENCE_SERVER", "http://127.0.0.1:1") // nothing listens there
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"acquire", "x"}, "--ttl is required"},
		{[]string{"acquire", "x", "--ttl", "0"}, "invalid ttl 0s: must be at least"},
		{[]string{"run", "x", "--ttl", "0", "--", "true"}, "invalid ttl 0s: must be at least"},
		{[]string{"write", "r", "--token", "1"}, "--value is required"},
		// 0 would silently become the node's 5s default: refused instead.
		{[]string{"serve", "--waiter-grace", "0"}, "--waiter-grace must be more than 0"},
	}
	for _, tc := range cases {
		code, _, stderr := runCLI(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fence %q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

func TestExitCodeOfReasons(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("connection refused"), exitError},
		{&usageError{"x"}, exitUsage},
		{&fence.InvalidError{Field: "ttl", Bound: "at least 10ms"}, exitUsage},
		{&fence.BusyError{Name: "x"}, exitBusy},
		{&fence.BusyError{Name: "x", Waited: true}, exitBusy},
		{&fence.StaleTokenError{Token: 1, LastAccepted: 2}, exitRefused},
		{&fence.NotHolderError{}, exitRefused},
		{&fence.LeaseExpiredError{}, exitRefused},
		{&fence.UnknownTokenError{}, exitRefused},
		{&fence.OpConflictError{}, exitRefused},
		{&fence.SessionExpiredError{Session: 3}, exitRefused},
		{&fence.ResourceExhaustedError{Limit: `waiters on lock "x"`, Bound: "at most 1024"}, exitLimit},
		{fmt.Errorf("fence: acquire: %w", &fence.ResourceExhaustedError{Limit: "remembered request_ids"}), exitLimit},
	}
	for _, tc := range cases {
		if got := exitCodeOf(tc.err); got != tc.want {
			t.Errorf("exitCodeOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestFailPrintsReasonAndFacts(t *testing.T) {
	var o, e bytes.Buffer
	code := fail(&globals{json: true}, &o, &e, &fence.StaleTokenError{Resource: "stock", Token: 1, LastAccepted: 2})
	if code != exitRefused {
		t.Fatalf("exit %d", code)
	}
	if got := e.String(); got != "STALE_TOKEN: token 1 is older than accepted token 2\n" {
		t.Errorf("stderr %q", got)
	}
	want := `{"error":{"lastToken":2,"message":"token 1 is older than accepted token 2","name":"stock","reason":"STALE_TOKEN","token":1}}` + "\n"
	if o.String() != want {
		t.Errorf("json %s, want %s", o.String(), want)
	}
}

func TestValueRendering(t *testing.T) {
	if v, text := valueJSON([]byte("8")); v != "OA==" || text == nil || *text != "8" {
		t.Errorf("valueJSON(8) = %q %v", v, text)
	}
	if v, text := valueJSON([]byte{0xff, 0}); v != "/wA=" || text != nil {
		t.Errorf("valueJSON(ff00) = %q %v", v, text)
	}
	for in, want := range map[string]string{"8": "8", "": `""`, "a b": `"a b"`, "\xff": "base64:/w=="} {
		if got := valueHuman([]byte(in)); got != want {
			t.Errorf("valueHuman(%q) = %q, want %q", in, got, want)
		}
	}
	if !strings.Contains(usageText, "run NAME... --ttl D") {
		t.Error("usage lacks run")
	}
}

// A log store, a listen or raft address serve cannot use (a port out of
// 0-65535 included: it failed late, with a raw listen error naming no
// flag) is a usage error naming the flag, refused before the data dir is
// made.
func TestServeRefusesUnknownLogStore(t *testing.T) {
	for _, tc := range []struct{ args []string }{
		{[]string{"--listen", "127.0.0.1:0", "--log-store", "nope"}},
		{[]string{"--listen", "notanaddr"}},
		{[]string{"--listen", "127.0.0.1:99999"}},
		{[]string{"--listen", "127.0.0.1:70000"}},
		{[]string{"--listen", "127.0.0.1:http"}},
		{[]string{"--bootstrap", "--raft-addr", "127.0.0.1:99999"}},
	} {
		var out, errb strings.Builder
		dir := filepath.Join(t.TempDir(), "data")
		code := run(append([]string{"serve", "--data-dir", dir}, tc.args...), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), tc.args[len(tc.args)-2]) {
			t.Fatalf("serve %q: exit %d, stderr %q; want %d naming %s", tc.args, code, errb.String(), exitUsage, tc.args[len(tc.args)-2])
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("serve %q made its data dir (%v)", tc.args, err)
		}
	}
}

// A FENCE_TEST_RESTORE_HALT that names no step of the restore is refused
// (a typo let a crash test restore to the end without halting anywhere).
func TestRestoreRefusesUnknownHaltStep(t *testing.T) {
	t.Setenv(envRestoreHalt, "stagged")
	var out, errb strings.Builder
	dir := filepath.Join(t.TempDir(), "data")
	code := run([]string{"restore", filepath.Join(t.TempDir(), "b.fence"), "--data-dir", dir}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "not a step of the restore") {
		t.Fatalf("exit %d, stderr %q; want %d naming the bad step", code, errb.String(), exitUsage)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused restore made its data dir (%v)", err)
	}
}
