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
	"github.com/fenceworks/fence/state"
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
	// The 1 MiB resource is written through the node: over HTTP its
	// reply, too, would have to be written within the short WriteTimeout
	// of when the request started (the fsync of a 1 MiB entry included),
	// which a loaded machine misses.
	a, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpAcquire, Name: "big", TTL: time.Hour})
	if err != nil || a.Err != nil {
		t.Fatal(err, a.Err)
	}
	if w, err := storeOf(s).Apply(ctx, state.Command{Op: state.OpWrite, Name: "big", Token: a.Lease.Token, Value: make([]byte, fence.MaxValueBytes)}); err != nil || w.Err != nil {
		t.Fatal(err, w.Err)
	}

	// A waiting acquire granted after 4 write timeouts is answered.
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "slow", Ttl: durationpb.New(4 * writeTimeout)})); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: "slow", Ttl: durationpb.New(time.Hour), Wait: durationpb.New(time.Minute)})); err != nil {
		t.Fatalf("acquire waiting longer than the write timeout: %v", err)
	}
	h1.CloseIdleConnections()
	until(t, "the client's connections are closed", func() bool { return s.conns.open.Load() == 0 })

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
	// The first read is answered (counted when its handler returns, before
	// its reply is written): the connection was taken. Only then is its
	// end awaited; a count cannot be missed, as the open connection could
	// be, taken and cut between two looks.
	until(t, "the pipelined reads are served", func() bool {
		return counted(t, s, "fence_requests_total", fencev1connect.ResourceServiceReadProcedure) >= 1
	})
	until(t, "the connection whose replies are not read is cut", func() bool { return s.conns.open.Load() == 0 })
}
