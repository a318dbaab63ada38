package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/fenceworks/fence"
)

// --memory-limit reads auto, off and sizes with their units, and refuses
// anything else, or a size below 64MiB, with an *InvalidError naming the
// field and the bound.
func TestParseMemoryLimit(t *testing.T) {
	ok := map[string]int64{
		"auto": -1, "AUTO": -1, "off": 0,
		"450MiB": 450 << 20, "2GiB": 2 << 30, "500MB": 500e6, "1GB": 1e9,
		"65536KiB": 64 << 20, "67108864": 64 << 20, "67108864B": 64 << 20, " 100 MiB ": 100 << 20,
	}
	for v, want := range ok {
		got, err := parseMemoryLimit(v)
		if err != nil || got != want {
			t.Errorf("parseMemoryLimit(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"", "0", "-1", "63MiB", "67108863", "1.5GiB", "450mb", "lots", "9223372036854775807GiB"} {
		_, err := parseMemoryLimit(v)
		var inv *fence.InvalidError
		if !errors.As(err, &inv) || inv.Field != "memory_limit" || inv.Bound != memoryLimitBound {
			t.Errorf("parseMemoryLimit(%q) = %v; want an InvalidError of memory_limit, bound %q", v, err, memoryLimitBound)
			continue
		}
		if msg := flagError(err); !strings.HasPrefix(msg, "--memory-limit must be auto, off, or a size of at least 64MiB") {
			t.Errorf("flagError(%q) = %q", v, msg)
		}
	}
}

// GOMEMLIMIT wins over the flag; auto is 90% of the cgroup's limit, none
// without one; off is none even in a cgroup.
func TestChooseMemoryLimit(t *testing.T) {
	cases := []struct {
		flag   int64
		env    string
		cgroup int64
		want   memoryLimitChoice
	}{
		{-1, "", 0, memoryLimitChoice{}},
		{-1, "", 1000 << 20, memoryLimitChoice{Bytes: 900 << 20, Source: "cgroup"}},
		{0, "", 1000 << 20, memoryLimitChoice{}},
		{450 << 20, "", 1000 << 20, memoryLimitChoice{Bytes: 450 << 20, Source: "flag"}},
		{450 << 20, "300MiB", 0, memoryLimitChoice{Source: "GOMEMLIMIT"}},
		{-1, "300MiB", 1000 << 20, memoryLimitChoice{Source: "GOMEMLIMIT"}},
	}
	for _, c := range cases {
		if got := chooseMemoryLimit(c.flag, c.env, c.cgroup); got != c.want {
			t.Errorf("chooseMemoryLimit(%d, %q, %d) = %+v; want %+v", c.flag, c.env, c.cgroup, got, c.want)
		}
	}
}

// The cgroup's limit: v2's memory.max (a number, or "max" for none), else
// v1's memory.limit_in_bytes (a near-2^63 value for none).
func TestCgroupMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	v2 := write("memory.max", "1073741824\n")
	v2max := write("memory.max.none", "max\n")
	v1 := write("limit_in_bytes", "536870912\n")
	v1none := write("limit_in_bytes.none", "9223372036854771712\n")
	for _, c := range []struct {
		files []string
		want  int64
	}{
		{[]string{v2, v1}, 1 << 30},
		{[]string{missing, v1}, 512 << 20},
		{[]string{v2max, v1}, 0},
		{[]string{missing, v1none}, 0},
		{[]string{missing}, 0},
	} {
		if got := cgroupMemoryLimit(c.files); got != c.want {
			t.Errorf("cgroupMemoryLimit(%v) = %d; want %d", c.files, got, c.want)
		}
	}
}

// serve refuses a --memory-limit (or FENCE_MEMORY_LIMIT) it cannot read
// before it makes the data dir: a usage error naming the flag and bound.
func TestServeRefusesBadMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"", []string{"--memory-limit", "10MiB"}},
		{"", []string{"--memory-limit", "lots"}},
		{"1KB", nil},
	} {
		t.Setenv("FENCE_MEMORY_LIMIT", tc.env)
		var out, errb strings.Builder
		dir := filepath.Join(t.TempDir(), "data")
		code := run(append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, tc.args...), &out, &errb)
		if code != exitUsage || !strings.Contains(errb.String(), "--memory-limit must be auto, off, or a size of at least 64MiB") {
			t.Fatalf("serve %q (FENCE_MEMORY_LIMIT=%q): exit %d, stderr %q; want %d naming --memory-limit and its bound", tc.args, tc.env, code, errb.String(), exitUsage)
		}
		if tc.env != "" && !strings.Contains(errb.String(), "FENCE_MEMORY_LIMIT") {
			t.Fatalf("stderr %q does not name FENCE_MEMORY_LIMIT", errb.String())
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("serve %q made its data dir (%v)", tc.args, err)
		}
	}
}

// applyMemoryLimit sets the runtime's limit it was given, and leaves it
// be for none (GOMEMLIMIT's, or the default).
func TestApplyMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	applyMemoryLimit(memoryLimitChoice{Bytes: 450 << 20, Source: "flag"})
	if got := debug.SetMemoryLimit(-1); got != 450<<20 {
		t.Fatalf("limit %d after applying 450MiB", got)
	}
	applyMemoryLimit(memoryLimitChoice{Source: "GOMEMLIMIT"})
	if got := debug.SetMemoryLimit(-1); got != 450<<20 {
		t.Fatalf("limit %d after applying none; want it left at 450MiB", got)
	}
}
