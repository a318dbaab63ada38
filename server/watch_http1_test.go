//go:build e2e

package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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
		idleStreamWatch(t, addr, ct, "jobs/")
		awaitCond(t, fmt.Sprintf("watch %d (%s) is open (its connection served)", i+1, ct), func() bool { return s.watches.Load() == int64(i+1) })
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
