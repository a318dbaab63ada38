//go:build e2e

package system_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/testkit/harness"
)

// fenceStatus runs `fence --server servers status args...`.
func fenceStatus(t *testing.T, servers string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBinary(t), append([]string{"--server", servers, "status"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("fence status: %v", err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// statusJSONLines parses fence status --json: one object per line.
func statusJSONLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err == io.EOF {
			return objs
		} else if err != nil {
			t.Fatalf("fence status --json: %v in %q", err, out)
		}
		objs = append(objs, o)
	}
}

// getReadyz is GET /readyz: its status code and body.
func getReadyz(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: attemptTimeout}
	resp, err := hc.Get(url + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// fence status against a cluster's follower reports what the follower
// applied (its leases held at its last applied server time, resources,
// counter, a server time > 0, the leader it follows), the same cluster id
// and term as the leader, in text and --json (one object per node); with
// its peers stopped the follower loses its leader and /readyz answers 503,
// /metrics says not ready, and fence status says ready: false with no
// leader.
func TestStatusAndReadyzOnACluster(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower *harness.Server
	for _, n := range c.Nodes() {
		if n != leader {
			follower = n
			break
		}
	}
	api := nodeAPI(leader.URL())
	lease, err := api.Locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "st-lock", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	token := lease.Msg.GetLease().GetToken()
	if _, err := api.Resources.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: "st-res", Token: token, Value: []byte("twelve bytes")})); err != nil {
		t.Fatal(err)
	}
	ls, err := leader.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fs *fencev1.NodeStatusResponse
	untilT(t, "the follower applies the write", func() bool {
		fs, err = follower.Status(ctx)
		return err == nil && fs.GetAppliedIndex() >= ls.GetCommitIndex() && fs.GetReady()
	})

	out, errOut, code := fenceStatus(t, follower.URL())
	if code != 0 {
		t.Fatalf("fence status on a follower: exit %d\n%s%s", code, out, errOut)
	}
	// Lines compared with runs of spaces as one (the label column's
	// width follows the longest label).
	squeezed := strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " ¶ ")), " ")
	for _, want := range []string{
		"node id: " + follower.ID(), "role: follower", "leader: " + leader.ID() + " (" + leader.RaftAddr() + ")",
		"ready: true", "leases held: 1 ¶", "resources: 1 ¶", "resource bytes: 12 B ¶",
		"last token: " + itoaU(token) + " ¶", "raft addr: " + follower.RaftAddr(), "data dir size: ",
	} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("fence status on follower %s lacks %q:\n%s", follower.ID(), want, out)
		}
	}

	out, errOut, code = fenceStatus(t, leader.URL()+","+follower.URL(), "--json")
	if code != 0 {
		t.Fatalf("fence status --json: exit %d\n%s%s", code, out, errOut)
	}
	objs := statusJSONLines(t, out)
	if len(objs) != 2 {
		t.Fatalf("fence status --json with two servers printed %d objects, want 2:\n%s", len(objs), out)
	}
	lj, fj := objs[0], objs[1]
	if lj["url"] != leader.URL() || fj["url"] != follower.URL() || lj["id"] != leader.ID() || fj["id"] != follower.ID() {
		t.Fatalf("fence status --json: objects out of order or misnamed:\n%s", out)
	}
	if lj["role"] != "leader" || fj["role"] != "follower" || fj["leaderId"] != leader.ID() || fj["leaderAddr"] != leader.RaftAddr() {
		t.Errorf("roles: leader %v, follower %v (leader %v at %v)", lj["role"], fj["role"], fj["leaderId"], fj["leaderAddr"])
	}
	if id, _ := lj["clusterId"].(string); len(id) != 36 {
		t.Errorf("the leader's clusterId %q: want the UUID its first leader recorded", id)
	}
	for _, o := range objs {
		id := o["id"]
		for key, want := range map[string]any{
			"leasesHeld": 1.0, "resources": 1.0, "resourceBytes": 12.0, "sessions": 0.0, "waiters": 0.0, "queued": 0.0,
			"lastToken": float64(token), "ready": true, "fatal": "", "term": lj["term"], "clusterId": lj["clusterId"],
		} {
			if o[key] != want {
				t.Errorf("%s: %s = %v, want %v", id, key, o[key], want)
			}
		}
		if b, _ := o["dataDirBytes"].(float64); b <= 0 {
			t.Errorf("%s: dataDirBytes = %v, want > 0", id, o["dataDirBytes"])
		}
		if v, _ := o["version"].(string); v == "" {
			t.Errorf("%s: no version", id)
		}
		if d, err := time.ParseDuration(o["serverTime"].(string)); err != nil || d <= 0 {
			t.Errorf("%s: serverTime = %v, want > 0", id, o["serverTime"])
		}
	}

	// The follower alone: no leader, not ready.
	for _, n := range c.Nodes() {
		if n != follower {
			if err := n.Stop(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Stopping the leader hands leadership over, possibly to this node,
	// which keeps it until its leader lease runs out: wait until it knows
	// no leader, then it must not be ready.
	untilT(t, "the follower without peers knows no leader", func() bool {
		st, err := follower.Status(ctx)
		return err == nil && st.GetLeaderId() == "" && st.GetRole() != "leader"
	})
	if code, body := getReadyz(t, follower.URL()); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Errorf("/readyz of a node that knows no leader = %d %q, want 503 not ready", code, body)
	}
	metrics := scrape(t, follower.URL())
	for _, want := range []string{"fence_ready 0", `fence_raft_state{state="leader"} 0`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics of the lone follower lacks %q:\n%s", want, grepLines(metrics, "fence_raft_state", "fence_ready"))
		}
	}
	// Printed, and exit 6: no node that answered knows a leader.
	out, errOut, code = fenceStatus(t, follower.URL(), "--json")
	if code != 6 {
		t.Fatalf("fence status --json on the lone follower: exit %d, want 6 (no leader)\n%s%s", code, out, errOut)
	}
	if o := statusJSONLines(t, out); len(o) != 1 || o[0]["ready"] != false {
		t.Errorf("fence status --json on the lone follower: %s, want ready false", out)
	}
	out, errOut, code = fenceStatus(t, follower.URL())
	if sq := strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " ¶ ")), " "); code != 6 || !strings.Contains(sq, "ready: false ¶") || !strings.Contains(sq, "leader: - ¶") {
		t.Errorf("fence status on the lone follower: exit %d, want 6 (no leader), ready false, leader -:\n%s%s", code, out, errOut)
	}
}

// scrape is GET /metrics.
func scrape(t *testing.T, url string) string {
	t.Helper()
	hc := &http.Client{Timeout: attemptTimeout}
	resp, err := hc.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// untilT polls cond every 20ms, failing t after hangGuard.
func untilT(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, hangGuard)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func itoaU(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// grepLines are the lines of s that start with one of prefixes.
func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
