//go:build e2e

package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenceworks/fence/testkit/testutil"
)

// Three `fence serve` processes whose raft ports speak mutual TLS, with
// certificates `fence cert --node-id` made, form a static cluster
// (--peers, raft ports bound on every interface: allowed, since they speak
// TLS), elect, list one another's status and forward a write; a process
// given another node's certificate refuses to start naming both ids.
func TestProcessPeerTLSCluster(t *testing.T) {
	dir := certDir(t, "", "--server-name", "", "--client-name", "", "--node-id", "a,b,c")
	addrs := map[string]string{"a": testutil.FreeAddr(t), "b": testutil.FreeAddr(t), "c": testutil.FreeAddr(t)}
	peers := "a=" + addrs["a"] + ",b=" + addrs["b"] + ",c=" + addrs["c"]
	peerFlags := func(id, certID string) []string {
		port := addrs[id][len("127.0.0.1:"):]
		return []string{"--node-id", id, "--raft-addr", "0.0.0.0:" + port, "--raft-advertise", addrs[id], "--peers", peers,
			"--peer-cert-file", filepath.Join(dir, "peer-"+certID+".crt"), "--peer-key-file", filepath.Join(dir, "peer-"+certID+".key"),
			"--peer-trusted-ca-file", filepath.Join(dir, "ca.crt")}
	}
	// b with a's certificate: refused before it serves.
	ctx, cancel := context.WithTimeout(context.Background(), procLimit) // one that serves is killed then
	defer cancel()
	out, err := exec.CommandContext(ctx, fenceBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, peerFlags("b", "a")...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "names node a") || !strings.Contains(string(out), "--node-id b") {
		t.Fatalf("fence serve as b with a's peer certificate: %v, want a refusal naming both\n%s", err, out)
	}
	var urls []string
	for _, id := range []string{"a", "b", "c"} {
		urls = append(urls, startServe(t, peerFlags(id, id)...).url)
	}
	fenceRun(t, strings.Join(urls, ","), "members", "--wait", "60s").want(t, exitOK, "fence members --wait")
	leader := ""
	for _, m := range listMembers(t, urls[0]).Members {
		if m.Leader {
			leader = m.ID
		}
	}
	awaitMembers(t, urls[2], leader, "a", "b", "c") // each member's status asked over peer TLS
	fenceRun(t, urls[1], "acquire", "peer-tls", "--ttl", "1m").want(t, exitOK, "acquire through a follower or the leader")
}
