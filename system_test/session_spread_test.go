//go:build e2e

package system_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/testkit/harness"
)

// Clients given every node of a cluster put their sessions on the leader
// (docs/clients.md, "Which node a Client uses"): 9 Clients whose endpoint
// list starts with a follower all open their session streams on the
// leader, none on a follower — not 9 on the first endpoint listed. Seen by
// the nodes themselves (fence_streams).
func TestClientsPutSessionsOnTheLeader(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	leader := waitLeader(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	// A follower first, as a user's list may well have it.
	var urls []string
	for _, n := range c.Nodes() {
		if n != leader {
			urls = append(urls, n.URL())
		}
	}
	urls = append(urls, leader.URL())
	const n = 9
	for i := range n {
		cl, err := client.New(strings.Join(urls, ","))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// A session-bound acquire opens the session and its stream; when
		// it returns, the stream is open on the node the Client uses.
		if _, err := cl.Acquire(ctx, fmt.Sprintf("placed/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var counts []string
	for _, node := range c.Nodes() {
		k := streamsOpen(t, node.URL())
		counts = append(counts, fmt.Sprintf("%s=%d", node.ID(), k))
		want := 0
		if node == leader {
			want = n
		}
		if k != want {
			defer t.Errorf("node %s holds %d session streams, want %d", node.ID(), k, want)
		}
	}
	t.Logf("session streams per node (leader %s): %s", leader.ID(), strings.Join(counts, " "))
}

// streamsOpen is a node's fence_streams gauge: its open session streams.
func streamsOpen(t *testing.T, url string) int {
	t.Helper()
	for _, l := range strings.Split(metricsText(t, url), "\n") {
		if v, ok := strings.CutPrefix(l, "fence_streams "); ok {
			k, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("fence_streams %q: %v", v, err)
			}
			return int(k)
		}
	}
	t.Fatalf("%s/metrics has no fence_streams", url)
	return 0
}
