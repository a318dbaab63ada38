package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// The lock-boundary flags as the request they make: NAMEs in the order
// given with --shared or --permits, then each --shared-lock shared; run's
// names are every argument before "--" (without one, the first).
func TestLockFlagsSpecs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"a"}, "[{a exclusive 0}]"},
		{[]string{"a", "--shared"}, "[{a shared 0}]"},
		{[]string{"x", "--permits", "4"}, "[{x exclusive 4}]"},
		{[]string{"sku/2", "sku/1", "--shared-lock", "catalog"}, "[{sku/2 exclusive 0} {sku/1 exclusive 0} {catalog shared 0}]"},
		{[]string{"--shared-lock", "c", "a", "--shared-lock", "d", "--shared"}, "[{a shared 0} {c shared 0} {d shared 0}]"},
		{[]string{"name:with:colons"}, "[{name:with:colons exclusive 0}]"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		lf := addLockFlags(fs)
		pos, after, err := parseArgs(fs, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		specs, err := lf.specs(append(pos, after...))
		if got := fmt.Sprintf("%v", specs); err != nil || got != tc.want {
			t.Errorf("%q: %s, %v; want %s", tc.args, got, err, tc.want)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	lf := addLockFlags(fs)
	if err := fs.Parse([]string{"--permits", "4294967297"}); err != nil {
		t.Fatal(err)
	}
	var inv *fence.InvalidError
	if _, err := lf.specs([]string{"x"}); !errors.As(err, &inv) || inv.Field != "permits" {
		t.Errorf("--permits 2^32+1: %v, want INVALID_ARGUMENT naming permits (not cut to 1)", err)
	}

	for _, tc := range []struct {
		pos, after         []string
		wantNames, wantCmd string
	}{
		{[]string{"a"}, []string{"true"}, "[a]", "[true]"},
		{[]string{"a", "b", "c"}, []string{"sh", "-c", "x"}, "[a b c]", "[sh -c x]"},
		{[]string{"a", "echo", "hi"}, nil, "[a]", "[echo hi]"},
	} {
		names, argv := runSplit(tc.pos, tc.after)
		if fmt.Sprint(names) != tc.wantNames || fmt.Sprint(argv) != tc.wantCmd {
			t.Errorf("run %v -- %v: names %v, command %v; want %s, %s", tc.pos, tc.after, names, argv, tc.wantNames, tc.wantCmd)
		}
	}
}

// --help of acquire, hold and run documents the set and the flags.
func TestLockFlagsInHelp(t *testing.T) {
	for _, cmd := range []string{"acquire", "hold", "run"} {
		var o, e bytes.Buffer
		code, stdout := run([]string{cmd, "--help"}, &o, &e), o.String()
		for _, want := range []string{"NAME...", "--shared", "--permits", "--shared-lock"} {
			if code != exitOK || !strings.Contains(stdout, want) {
				t.Errorf("fence %s --help: exit %d, no %q in %s", cmd, code, want, stdout)
			}
		}
	}
}

// PERMITS_MISMATCH from the CLI: exit 4, the reason on stderr, and in
// --json the API's facts (name, permits, currentPermits).
func TestFailPrintsPermitsMismatch(t *testing.T) {
	var o, e bytes.Buffer
	code := fail(&globals{json: true}, &o, &e, &fence.PermitsMismatchError{Name: "exchange", Permits: 3, Current: 2})
	if code != exitRefused || !strings.HasPrefix(e.String(), "PERMITS_MISMATCH: ") {
		t.Fatalf("exit %d, stderr %q", code, e.String())
	}
	want := `{"error":{"currentPermits":2,"message":"lock \"exchange\" has 2 permits; the request named 3","name":"exchange","permits":3,"reason":"PERMITS_MISMATCH"}}` + "\n"
	if o.String() != want {
		t.Errorf("json %s, want %s", o.String(), want)
	}
}
