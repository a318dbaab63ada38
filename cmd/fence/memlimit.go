package main

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/fenceworks/fence"
)

// --memory-limit: the soft memory limit of `fence serve`'s Go runtime
// (debug.SetMemoryLimit). The runtime collects garbage when the heap grows
// to twice what was live at the last collection (GOGC=100), so a server
// that gains a million leases sits at about twice its live heap; a soft
// limit makes it collect sooner instead, at the price of more collections
// as the live heap nears it (docs/operations.md, "Memory").
//
//	auto (the default): 90% of the memory limit of the process's cgroup
//	  (v2 memory.max, v1 memory.limit_in_bytes), none if it has none;
//	off: no limit (the runtime's default);
//	SIZE: that many bytes, with an optional unit B, KB, MB, GB (powers of
//	  1000) or KiB, MiB, GiB (powers of 1024); at least minMemoryLimit.
//
// GOMEMLIMIT in the environment wins over the flag: the runtime read it
// at start and serve leaves it be (it logs that it did).

// minMemoryLimit is the least --memory-limit: below it a server with a
// handful of locks would collect all the time.
const minMemoryLimit = 64 << 20

// memoryLimitAutoShare is auto's share of the cgroup's limit, leaving room
// for what the runtime does not count (the binary's pages, the kernel's
// buffers of the process).
const memoryLimitAutoShare = 0.9

// cgroupLimitFiles are the files auto reads, first found first: cgroup v2
// then v1. A value of "max", or v1's near-2^63 "unlimited", is no limit.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitBound is what --memory-limit accepts, said in its refusal.
const memoryLimitBound = "auto, off, or a size of at least 64MiB (e.g. 450MiB, 2GB, 500000000)"

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// parseMemoryLimit reads --memory-limit's value: auto (-1), off (0) or a
// size in bytes. A value it refuses is a *fence.InvalidError naming the
// field and the bound.
func parseMemoryLimit(v string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "auto":
		return -1, nil
	case "off":
		return 0, nil
	}
	refuse := fence.Invalid("memory_limit", memoryLimitBound, strconv.Quote(v))
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult || n*mult < minMemoryLimit {
		return 0, refuse
	}
	return n * mult, nil
}

// cgroupMemoryLimit is the memory limit of the process's cgroup read from
// the first of files that exists, 0 if none says one.
func cgroupMemoryLimit(files []string) int64 {
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // v1 says "no limit" as ~2^63 rounded to a page
			return 0
		}
		return n
	}
	return 0
}

// memoryLimitChoice is what serve does about the runtime's memory limit.
type memoryLimitChoice struct {
	Bytes  int64  // the limit set, 0 for none
	Source string // "GOMEMLIMIT", "flag", "cgroup" or "" (none)
}

// chooseMemoryLimit decides the limit from the flag's parsed value (auto
// -1, off 0, else bytes), the GOMEMLIMIT variable and the cgroup's limit.
// GOMEMLIMIT wins: it was the runtime's already.
func chooseMemoryLimit(flagValue int64, gomemlimit string, cgroup int64) memoryLimitChoice {
	switch {
	case strings.TrimSpace(gomemlimit) != "":
		return memoryLimitChoice{Source: "GOMEMLIMIT"}
	case flagValue > 0:
		return memoryLimitChoice{Bytes: flagValue, Source: "flag"}
	case flagValue < 0 && cgroup > 0:
		return memoryLimitChoice{Bytes: int64(float64(cgroup) * memoryLimitAutoShare), Source: "cgroup"}
	}
	return memoryLimitChoice{}
}

// applyMemoryLimit sets the runtime's soft limit chosen (none: leaves it).
func applyMemoryLimit(c memoryLimitChoice) {
	if c.Bytes > 0 {
		debug.SetMemoryLimit(c.Bytes)
	}
}
