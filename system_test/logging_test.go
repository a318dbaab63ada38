//go:build e2e

package system_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// logRecord is one line of a node's --log-format json output.
type logRecord map[string]any

// jsonLog parses s's output of its current start: every line but the
// harness's start header must be one JSON object.
func jsonLog(t *testing.T, s *harness.Server) []logRecord {
	t.Helper()
	var out []logRecord
	for l := range strings.SplitSeq(s.LastLog(), "\n") {
		if l == "" || strings.HasPrefix(l, "=== ") {
			continue
		}
		var r logRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: log line is not JSON: %q: %v", s.ID(), l, err)
		}
		out = append(out, r)
	}
	return out
}

// A leadership change in a 3-node cluster of real processes (the leader
// killed with SIGKILL): each survivor logs one "leader changed" line with
// its node id, the new leader and the term it leads in, and its log is
// JSON lines only (--log-format json).
func TestClusterLeaderChangeIsLogged(t *testing.T) {
	cfg := clusterConfig(3)
	cfg.Args = append(cfg.Args, "--log-format", "json")
	c := harness.StartClusterT(t, cfg)
	old := waitLeader(t, c)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	next := waitLeader(t, c, old)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	st, err := next.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Nodes() {
		if s == old {
			continue
		}
		var found []logRecord
		deadline := time.Now().Add(hangGuard)
		for {
			found = found[:0]
			for _, r := range jsonLog(t, s) {
				if r["msg"] == "leader changed" && r["leader_id"] == next.ID() && r["term"] == float64(st.Term) {
					found = append(found, r)
				}
			}
			if len(found) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(found) != 1 {
			t.Fatalf("%s: %d 'leader changed' lines naming %s in term %d, want 1; log:\n%s", s.ID(), len(found), next.ID(), st.Term, s.LogTail(4<<10))
		}
		role := "follower"
		if s == next {
			role = "leader"
		}
		if r := found[0]; r["node_id"] != s.ID() || r["role"] != role || r["level"] != "INFO" {
			t.Errorf("%s: %v, want node_id %s, role %s, INFO", s.ID(), r, s.ID(), role)
		}
	}
}
