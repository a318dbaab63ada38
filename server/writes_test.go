package server

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// A client that asks for large replies and never reads them loses its
// connection once a reply cannot be written within WriteTimeout (it held
// its slot forever); a blocking acquire whose wait outlasts WriteTimeout
// still gets its reply.
func TestUnreadRepliesAreCut(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	s, url := startServerWith(t, Config{WriteTimeout: writeTimeout})
	ctx := context.Background()
	h1 := &http.Client{Transport: &http.Transport{}}
	lc := fencev1connect.NewLockServiceClient(h1, url)
	rc := fencev1connect.NewResourceServiceClient(h1, url)
	a, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "big", Ttl: durationpb.New(time.Hour)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: "big", Token: a.Msg.Lease.Token, Value: make([]byte, fence.MaxValueBytes)})); err != nil {
		t.Fatal(err)
	}

	// A waiting acquire granted after 4 write timeouts is answered.
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "slow", Ttl: durationpb.New(4 * writeTimeout)})); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "slow", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Minute)})); err != nil {
		t.Fatalf("acquire waiting longer than the write timeout: %v", err)
	}
	h1.CloseIdleConnections()
	for s.conns.open.Load() != 0 {
		time.Sleep(time.Millisecond)
	}

	// 16 pipelined reads of 1 MiB, more than any socket buffers hold, on
	// a connection whose reader never reads.
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	msg, _ := proto.Marshal(&fencev1.ReadRequest{Resource: "big"})
	var reqs bytes.Buffer
	for range 16 {
		fmt.Fprintf(&reqs, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\nContent-Length: %d\r\n\r\n%s",
			fencev1connect.ResourceServiceReadProcedure, len(msg), msg)
	}
	if _, err := conn.Write(reqs.Bytes()); err != nil {
		t.Fatal(err)
	}
	for s.conns.open.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	deadline := time.Now().Add(hangGuard)
	for s.conns.open.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a connection whose replies are not read is still open after %s", hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
