//go:build e2e

package system_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/testkit/harness"
	"github.com/fenceworks/fence/testkit/testutil"
)

// labRun is a `fence lab` process.
type labRun struct {
	cmd  *exec.Cmd
	out  testutil.Buffer
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
}

// startLab starts `fence lab --server URL1,URL2,... --unit unit`.
func startLab(t *testing.T, urls []string, unit time.Duration) *labRun {
	t.Helper()
	r := &labRun{done: make(chan struct{})}
	r.cmd = exec.Command(fenceBinary(t), "lab", "--server", strings.Join(urls, ","), "--unit", unit.String())
	r.cmd.Env = append(os.Environ(), "FENCE_SERVER=")
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() { r.cmd.Process.Kill(); <-r.done })
	return r
}

// wait waits for the lab to end and fails t unless it exited 0 (every row
// of the story's tables came out as the story says).
func (r *labRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
		checkRaces(t, "fence lab", r.out.String())
		if r.err != nil {
			t.Fatalf("fence lab against the cluster: %v\n%s", r.err, r.out.String())
		}
		t.Logf("fence lab:\n%s", r.out.String())
	case <-time.After(2 * hangGuard):
		t.Fatalf("fence lab did not end; output:\n%s", r.out.String())
	}
}

// TestClusterLab: `fence lab --server URL` passes against a 3-node cluster
// when URL is a follower's: every call is forwarded to the leader (the
// client cannot route around a forwarding fault with one endpoint).
func TestClusterLab(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	leader := waitLeader(t, c)
	var follower *harness.Server
	for _, n := range c.Nodes() {
		if n != leader {
			follower = n
		}
	}
	startLab(t, []string{follower.URL()}, 200*time.Millisecond).wait(t)
}

// TestClusterLabLeaderKilled: the same lab with every node in --server, the
// leader first and killed (-9)
// during the fenced play between its t=4 (B's try, refused busy) and t=6
// (B's acquire): A's lease, granted by the old leader, still ends for the
// new one in time for B, B is granted it with a greater token, and A's late
// write is refused. One story second is 2s here so that the failover (about
// two election timeouts, plus the time since the last command, both of
// which lengthen A's lease: server time stands still without a leader) fits
// before B's wait runs out at t=7.
func TestClusterLabLeaderKilled(t *testing.T) {
	c := harness.StartClusterT(t, clusterConfig(3))
	leader := waitLeader(t, c)
	const unit = 2 * time.Second
	urls := []string{leader.URL()} // first: its clients must fail over
	for _, n := range c.Nodes() {
		if n != leader {
			urls = append(urls, n.URL())
		}
	}
	lab := startLab(t, urls, unit)

	// The fenced play begins when A's lease on lab-ID/fenced/... appears.
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	watch := newFailover(c.URLs())
	var t0 time.Time
	for t0.IsZero() {
		err := watch.do(ctx, func(ctx context.Context, a api) error {
			resp, err := a.Locks.List(ctx, connect.NewRequest(&fencev1.ListRequest{Prefix: "lab-"}))
			if err != nil {
				return err
			}
			for _, li := range resp.Msg.GetLocks() {
				if strings.Contains(li.GetName(), "/fenced/") && li.GetLease() != nil {
					t0 = time.Now()
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("watching for the fenced play: %v\n%s", err, lab.out.String())
		}
		select {
		case <-lab.done:
			lab.wait(t)
			t.Fatal("fence lab ended before its fenced play was seen")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// t=4.2: just after B's try at t=4.
	time.Sleep(time.Until(t0.Add(42 * unit / 10)))
	killed := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader %s at t=%.2f of the fenced play", leader.ID(), float64(killed.Sub(t0))/float64(unit))
	lab.wait(t)
	// A play whose timeline slipped is played again (fence lab --help),
	// and that play has no leader killed in it: the verdict must be the
	// first play's, the one the failover happened in.
	if strings.Contains(lab.out.String(), "played again") {
		t.Fatalf("the play the leader was killed in slipped, and fence lab played the story again without a failover:\n%s", lab.out.String())
	}
	if l, err := c.WaitLeader(ctx, leader); err == nil {
		t.Logf("%s leads now", l.ID())
	}
}
