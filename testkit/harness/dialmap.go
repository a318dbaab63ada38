package harness

import (
	"sort"
	"strings"
)

// DialMapEnv is the test-only environment variable cmd/fence reads: a
// node dials the mapped address instead of each raft address in it (raft
// RPCs and forwarded API calls alike), so a test can put a proxy on each
// directed peer link.
const DialMapEnv = "FENCE_TEST_DIAL_MAP"

// DialMap maps a raft address to the address to dial instead.
type DialMap map[string]string

// String is the variable's value: "raftaddr1=dialaddr1,raftaddr2=dialaddr2",
// sorted (so the same map always reads the same in a log).
func (m DialMap) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// Env is DialMapEnv=String(), for Config.Env.
func (m DialMap) Env() string { return DialMapEnv + "=" + m.String() }
