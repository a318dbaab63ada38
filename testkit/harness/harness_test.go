package harness

import (
	"strings"
	"testing"
)

// The processes themselves are exercised by system_test (every system test
// starts its servers through this package) and testkit/chaos; these are
// the pure parts.

func TestDialMapString(t *testing.T) {
	m := DialMap{"127.0.0.1:2": "127.0.0.1:20", "127.0.0.1:1": "127.0.0.1:10"}
	if got, want := m.Env(), "FENCE_TEST_DIAL_MAP=127.0.0.1:1=127.0.0.1:10,127.0.0.1:2=127.0.0.1:20"; got != want {
		t.Fatalf("Env() = %q, want %q", got, want)
	}
	if got := (DialMap{}).String(); got != "" {
		t.Fatalf("empty map = %q", got)
	}
}

func TestLogBufferSinceAndLimit(t *testing.T) {
	var l logBuffer
	l.Write([]byte("=== a start 1\nfirst\n"))
	if got := l.since(startHeader); got != "=== a start 1\nfirst\n" {
		t.Fatalf("since after one start = %q", got)
	}
	l.Write([]byte("=== a start 2\nsecond\n"))
	if got := l.since(startHeader); got != "=== a start 2\nsecond\n" {
		t.Fatalf("since after two starts = %q", got)
	}
	small := logBuffer{max: 8}
	small.Write([]byte("0123456789"))
	if got := small.String(); got != "23456789" {
		t.Fatalf("limited buffer = %q", got)
	}
	if got := tail(strings.Repeat("x", 10)+"\nlast line\n", 12); got != "…\nlast line\n" {
		t.Fatalf("tail = %q", got)
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if modulePathOf(root+"/go.mod") != ModulePath {
		t.Fatalf("ModuleRoot %s: its go.mod is not %s", root, ModulePath)
	}
}
