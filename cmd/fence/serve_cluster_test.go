//go:build e2e

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenceworks/fence/daemon"
	"github.com/fenceworks/fence/node"
	"github.com/fenceworks/fence/raftstore"
)

// serveExit runs `fence serve` with args (and env added) as a process and
// returns its exit code and stderr. Every case here must be refused before
// the server starts: one that starts would serve until killed, so a case
// still running after procLimit fails the test instead of hanging it.
func serveExit(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, fenceBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var e bytes.Buffer
	cmd.Stderr = &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("fence serve %q was not refused: still running after %s\n%s", args, procLimit, e.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), e.String()
}

// Bad cluster flags are refused at once (exit 2), each with a message that
// names the flag (or the test-only variable) at fault.
func TestServeClusterFlagErrors(t *testing.T) {
	const ra = "127.0.0.1:17001" // never bound: every case is refused first
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--bootstrap"}, "--bootstrap needs --raft-addr"},
		{nil, []string{"--join", "http://127.0.0.1:7420"}, "--join needs --raft-addr"},
		{nil, []string{"--peers", "fence-1=" + ra}, "--peers needs --raft-addr"},
		{nil, []string{"--raft-advertise", ra}, "--raft-advertise needs --raft-addr"},
		{nil, []string{"--raft-addr", ra, "--bootstrap", "--peers", "fence-1=" + ra}, "--bootstrap, --join and --peers"},
		{nil, []string{"--raft-addr", ra, "--bootstrap", "--join", "http://127.0.0.1:7420"}, "--bootstrap, --join and --peers"},
		{nil, []string{"--raft-addr", ra, "--join", "http://127.0.0.1:7420", "--peers", "fence-1=" + ra}, "--bootstrap, --join and --peers"},
		{nil, []string{"--raft-addr", "nonsense", "--bootstrap"}, "--raft-addr"},
		{nil, []string{"--raft-addr", "0.0.0.0:17001", "--bootstrap"}, "give --raft-advertise"},
		{nil, []string{"--raft-addr", ra, "--raft-advertise", "0.0.0.0:17001", "--bootstrap"}, "--raft-advertise"},
		{nil, []string{"--raft-addr", ra, "--raft-advertise", "h", "--bootstrap"}, "--raft-advertise"},
		{nil, []string{"--node-id", "", "--raft-addr", ra, "--bootstrap"}, "--node-id"},
		{nil, []string{"--node-id", "a b"}, "--node-id"},
		{nil, []string{"--node-id", "a=b"}, "--node-id"},
		{nil, []string{"--raft-addr", ra, "--join", "127.0.0.1:7420"}, "--join"},
		{nil, []string{"--raft-addr", ra, "--join", "ftp://h:1"}, "--join"},
		{nil, []string{"--raft-addr", ra, "--peers", "fence-2=127.0.0.1:17002"}, "--peers must include this node (--node-id fence-1)"},
		{nil, []string{"--raft-addr", ra, "--peers", "fence-1=127.0.0.1:17009,fence-2=127.0.0.1:17002"}, "--peers gives fence-1 the address 127.0.0.1:17009"},
		{nil, []string{"--raft-addr", ra, "--peers", "fence-1=" + ra + ",fence-1=127.0.0.1:17002"}, "--peers names fence-1 twice"},
		{nil, []string{"--raft-addr", ra, "--peers", "fence-1"}, "--peers"},
		{nil, []string{"--raft-addr", ra, "--peers", "fence-1=" + ra + ",x=0.0.0.0:1"}, "--peers address of x"},
		{nil, []string{"--heartbeat-timeout", "1ms"}, "--heartbeat-timeout"},
		{nil, []string{"--commit-timeout", "-1s"}, "--commit-timeout"},
		{nil, []string{"--election-timeout", "5"}, "election-timeout: a duration needs a unit"},
		{nil, []string{"--raft-addr", ra, "--bootstrap", "--leader-lease-timeout", "2s"}, "--leader-lease-timeout (2s) must be at most --heartbeat-timeout (500ms)"},
		{nil, []string{"--raft-addr", ra, "--bootstrap", "--election-timeout", "100ms"}, "--election-timeout (100ms) must be at least --heartbeat-timeout (500ms)"},
		{nil, []string{"--heartbeat-timeout", "1s"}, "--election-timeout (100ms) must be at least --heartbeat-timeout (1s)"}, // alone: the default election timeout
		{[]string{"FENCE_TEST_CLOCK_RATE=0"}, nil, "FENCE_TEST_CLOCK_RATE"},
		{[]string{"FENCE_TEST_CLOCK_RATE=fast"}, nil, "FENCE_TEST_CLOCK_RATE"},
		{[]string{"FENCE_TEST_CLOCK_RATE=1e308"}, nil, "FENCE_TEST_CLOCK_RATE"},
		{[]string{"FENCE_TEST_CLOCK_OFFSET=1"}, nil, "FENCE_TEST_CLOCK_OFFSET"},
		{[]string{"FENCE_TEST_DIAL_MAP=garbage"}, nil, "FENCE_TEST_DIAL_MAP"},
	}
	for _, tc := range cases {
		code, stderr := serveExit(t, tc.env, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fence serve %q (env %q): exit %d, stderr %q; want %d naming %q", tc.args, tc.env, code, stderr, exitUsage, tc.want)
		}
	}
}

// parsedServe is what serveCmd makes of the cluster flags and the test
// hooks' variables.
type parsedServe struct {
	daemon.ClusterConfig
	DialMap     map[string]string
	ClockOffset time.Duration
	ClockRate   float64
}

// parseServeFlags parses serve's cluster flags as serveCmd does.
func parseServeFlags(t *testing.T, env map[string]string, args ...string) (parsedServe, error) {
	t.Helper()
	fs, s := serveFlags(&globals{}, io.Discard)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	c, h, err := s.cf.config(func(k string) string { return env[k] })
	p := parsedServe{ClusterConfig: c}
	if d, ok := h.Dialer.(raftstore.MapDialer); ok {
		p.DialMap = d
	} else if h.Dialer != nil {
		t.Fatalf("dialer %T, want a raftstore.MapDialer", h.Dialer)
	}
	if s, ok := h.Clock.(daemon.SkewedClock); ok {
		p.ClockOffset, p.ClockRate = s.Offset(), s.Rate()
	} else if h.Clock != nil {
		t.Fatalf("clock %T, want a daemon.SkewedClock", h.Clock)
	}
	return p, err
}

// Good cluster flags become the server's ClusterConfig; the test-only
// variables are read into it; no flag at all is today's single node.
func TestServeClusterFlagsConfig(t *testing.T) {
	c, err := parseServeFlags(t, nil)
	if err != nil || c.RaftAddr != "" || c.Bootstrap || c.Join != nil || c.Peers != nil || c.DialMap != nil || c.ClockOffset != 0 || c.ClockRate != 0 || c.HeartbeatTimeout != 0 {
		t.Fatalf("no flags: %+v, %v; want the zero config (a single node, the node's own timeouts)", c, err)
	}
	c, err = parseServeFlags(t, map[string]string{
		"FENCE_TEST_DIAL_MAP": "127.0.0.1:1=127.0.0.1:9,127.0.0.1:2=127.0.0.1:8", "FENCE_TEST_CLOCK_OFFSET": "+1h", "FENCE_TEST_CLOCK_RATE": "1.005",
	}, "--node-id", "b", "--raft-addr", "0.0.0.0:2", "--raft-advertise", "127.0.0.1:2",
		"--peers", "a=127.0.0.1:1,b=127.0.0.1:2", "--heartbeat-timeout", "200ms", "--election-timeout", "400ms", "--leader-lease-timeout", "150ms", "--commit-timeout", "3ms")
	if err != nil {
		t.Fatal(err)
	}
	if c.RaftAddr != "0.0.0.0:2" || c.RaftAdvertise != "127.0.0.1:2" || !slices.Equal(c.Peers, []node.Peer{{ID: "a", Addr: "127.0.0.1:1"}, {ID: "b", Addr: "127.0.0.1:2"}}) {
		t.Errorf("addresses/peers: %+v", c)
	}
	if c.HeartbeatTimeout != 200*time.Millisecond || c.ElectionTimeout != 400*time.Millisecond || c.LeaderLeaseTimeout != 150*time.Millisecond || c.CommitTimeout != 3*time.Millisecond {
		t.Errorf("timeouts: %+v", c)
	}
	if c.DialMap["127.0.0.1:1"] != "127.0.0.1:9" || c.DialMap["127.0.0.1:2"] != "127.0.0.1:8" || c.ClockOffset != time.Hour || c.ClockRate != 1.005 {
		t.Errorf("test hooks: dial map %v, offset %s, rate %v", c.DialMap, c.ClockOffset, c.ClockRate)
	}
	c, err = parseServeFlags(t, map[string]string{"FENCE_TEST_CLOCK_OFFSET": "-1h"}, "--raft-addr", "127.0.0.1:2", "--join", "http://127.0.0.1:7420,http://127.0.0.1:7421/")
	if err != nil || !slices.Equal(c.Join, []string{"http://127.0.0.1:7420", "http://127.0.0.1:7421"}) || c.ClockOffset != -time.Hour {
		t.Errorf("--join: %+v, %v", c, err)
	}
}

// serve --help shows the cluster flags and says which environment
// variables are test-only.
func TestServeHelpNamesClusterFlagsAndTestHooks(t *testing.T) {
	code, stdout, _ := runCLI("serve", "--help")
	for _, want := range []string{"-raft-addr", "-bootstrap", "-join", "-peers", "-election-timeout", "Test-only environment", "FENCE_TEST_DIAL_MAP", "FENCE_TEST_CLOCK_OFFSET", "FENCE_TEST_CLOCK_RATE", "never set\nin production"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("fence serve --help (exit %d) lacks %q", code, want)
		}
	}
}
