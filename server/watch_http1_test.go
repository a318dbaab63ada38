//go:build e2e

package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// idleStreamWatch opens LockService.Watch of prefix on a raw HTTP/1.1
// connection to addr as a streaming call of contentType (Connect or
// gRPC-Web, JSON), and never reads the reply.
func idleStreamWatch(t *testing.T, addr, contentType, prefix string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	msg := fmt.Sprintf(`{"prefix":%q}`, prefix)
	body := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		fencev1connect.LockServiceWatchProcedure, addr, contentType, len(body))
	if _, err := c.Write(append([]byte(head), body...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// A Connect or gRPC-Web watch over HTTP/1.1 gives its connection's slot
// of --max-conns back while it is open, as an SSE watch does: four idle
// (never read) streaming watches against --max-conns 2 leave a plain call
// served.
func TestStreamingWatchesOverHTTP1HoldNoConnSlot(t *testing.T) {
	s, url := startServerOnNode(t, Config{MaxConns: 2, MaxWatches: 10})
	addr := strings.TrimPrefix(url, "http://")
	for i, ct := range []string{"application/connect+json", "application/grpc-web+json", "application/connect+json", "application/grpc-web+json"} {
		c := idleStreamWatch(t, addr, ct, "jobs/")
		awaitCond(t, fmt.Sprintf("watch %d (%s) is open (its connection served)", i+1, ct), func() bool { return s.watches.Load() == int64(i+1) })
		if i < 2 {
			// Its connection, slot given back, is closed when the watch
			// ends rather than serving other calls.
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || !resp.Close {
				t.Fatalf("a %s watch over HTTP/1.1: %d, Connection: %q; want 200 and close", ct, resp.StatusCode, resp.Header.Get("Connection"))
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+fencev1connect.LockServiceAcquireProcedure, strings.NewReader(`{"name":"jobs/a","owner":"o","ttl":"60s"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("an Acquire while four watches are open against --max-conns 2: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("an Acquire while four watches are open: %d %s", resp.StatusCode, b)
	}
}

// An SSE watch of a wide prefix whose client never reads is cut (reason
// "send") once its write blocks: its connection's small send buffer
// fills after a few pages, where an autotuned one took megabytes of its
// state and left the watch waiting for changes, never cut.
func TestIdleWatchOfAWidePrefixIsCut(t *testing.T) {
	s, url := startServerOnNode(t, Config{WriteTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	for i := range 320 {
		locks := make([]fence.LockSpec, 64)
		for j := range locks {
			locks[j] = fence.LockSpec{Name: fmt.Sprintf("big/%04d/%02d", i, j)}
		}
		if _, err := s.Service().Acquire(ctx, fence.AcquireRequest{Locks: locks, Owner: "o", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	addr := strings.TrimPrefix(url, "http://")
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/watch?prefix=big/ HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	awaitCond(t, "the idle watch is open", func() bool { return s.watches.Load() == 1 })
	awaitCond(t, "the idle watch is cut", func() bool { return s.watches.Load() == 0 })
	var m dto.Metric
	if err := s.metrics.watchCuts.WithLabelValues("send").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Fatalf("fence_watch_cut_total{reason=send} = %v; want 1", got)
	}
}
