//go:build e2e

package system_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// slowConns is how many slow clients the test holds open at once.
const slowConns = 2000

// raiseFileLimit lifts this process's open-file limit (inherited by the
// server it starts) so that both ends of every slow connection fit.
func raiseFileLimit(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= need {
		return
	}
	if lim.Max < need {
		t.Fatalf("open-file hard limit %d is below the %d this test needs (raise it: ulimit -Hn)", lim.Max, need)
	}
	lim.Cur = need
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("raise the open-file limit to %d: %v", need, err)
	}
}

// 2,000 clients trickle their headers or their bodies, a byte a second, and
// hold their connections; ordinary acquire/release requests still succeed
// meanwhile; then the read deadlines cut every slow connection, and the
// server still serves.
//
// The deadlines must leave time to open the 2,000 connections and run the
// ordinary requests before they cut anything; how long that takes is the
// machine's business, so the test starts with 3 s deadlines and, when one
// was cut too soon (that round proves nothing), plays again on a new
// server with twice the deadlines, up to 48 s (a hang guard).
func TestSlowConnectionsDoNotStopTheServer(t *testing.T) {
	raiseFileLimit(t, 3*slowConns+1024)
	for timeout := 3 * time.Second; ; timeout *= 2 {
		if timeout > 48*time.Second {
			t.Fatalf("slow connections were cut before the ordinary requests were done even with %v read deadlines", timeout/2)
		}
		if slowConnsRound(t, timeout) {
			return
		}
		t.Logf("with %v read deadlines some slow connections were cut before the ordinary requests were done: again with twice the deadlines", timeout)
	}
}

// slowConnsRound plays the test once against a new server whose read
// deadlines are timeout. It returns false when a slow connection was cut
// before the ordinary requests were done: the deadlines were too short
// for this machine, nothing was shown.
func slowConnsRound(t *testing.T, timeout time.Duration) bool {
	t.Helper()
	srv := startServer(t, "--read-header-timeout", timeout.String(), "--read-timeout", timeout.String())
	defer srv.Stop() // the next round starts its own; the harness stops it again harmlessly
	addr := strings.TrimPrefix(srv.URL(), "http://")

	var (
		cut      atomic.Int64 // slow connections the server closed
		failures = make(chan error, slowConns)
		stop     = make(chan struct{})
	)
	defer close(stop)
	for i := range slowConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		defer c.Close()
		// The first part: half a header, or a whole header announcing a
		// body that never arrives in full.
		var first string
		if i%2 == 0 {
			first = "POST /fence.v1.LockService/Acquire HTTP/1.1\r\nHost: x\r\n"
		} else {
			first = "POST /fence.v1.LockService/Acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
		}
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		go func() { // trickle: one byte a second until the server cuts it
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		go func() { // wait for the server to close it
			c.SetReadDeadline(time.Now().Add(hangGuard))
			_, err := io.Copy(io.Discard, bufio.NewReader(c))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				failures <- fmt.Errorf("slow connection %d was not cut within %s", i, hangGuard)
				return
			}
			cut.Add(1)
		}()
	}

	// All of them are open at once on the server...
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	if waitMetric(t, hc, srv.URL(), "fence_http_connections", slowConns); cut.Load() > 0 {
		return false
	}

	// ...and ordinary requests succeed meanwhile.
	lc := fencev1connect.NewLockServiceClient(hc, srv.URL())
	ctx := context.Background()
	for i := range 50 {
		a, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: fmt.Sprint("ordinary-", i%5), Owner: "o", Ttl: durationpb.New(time.Minute)}))
		if err != nil {
			t.Fatalf("ordinary acquire %d with %d slow connections open: %v", i, slowConns, err)
		}
		if _, err := lc.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: a.Msg.Lease.Name, Token: a.Msg.Lease.Token})); err != nil {
			t.Fatalf("ordinary release %d: %v", i, err)
		}
	}
	if cut.Load() > 0 {
		return false
	}

	// The read deadlines cut every slow connection.
	done := make(chan struct{})
	go func() {
		for cut.Load()+int64(len(failures)) < slowConns {
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(hangGuard + 10*time.Second):
		t.Fatalf("only %d of %d slow connections were cut", cut.Load(), slowConns)
	}
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "after", Ttl: durationpb.New(time.Minute)})); err != nil {
		t.Fatalf("acquire after the slow connections were cut: %v", err)
	}
	return true
}

// waitMetric polls /metrics until gauge name is at least min and returns
// its value; the hang guard running out fails the test.
func waitMetric(t *testing.T, hc *http.Client, url, name string, min float64) float64 {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	var last float64
	for time.Now().Before(deadline) {
		resp, err := hc.Get(url + "/metrics")
		if err == nil {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
					last, _ = strconv.ParseFloat(v, 64)
				}
			}
			resp.Body.Close()
			if last >= min {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s stayed at %v, below %v", name, last, min)
	return 0
}
