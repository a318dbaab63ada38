package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// F10: a second backup while one is being streamed is refused
// RESOURCE_EXHAUSTED and counted as
// fence_resource_exhausted_total{limit="max_backups"}, not "other". The
// first backup (8 MiB of values, read through a socket with a 16 KiB
// receive buffer) is held open mid-stream by not reading it.
func TestSecondBackupCountedAsMaxBackups(t *testing.T) {
	_, url := startServer(t)
	ctx := context.Background()
	c := protocols(url)[1] // gRPC: protobuf, no base64 of the values
	for i := range 8 {
		name := fmt.Sprintf("big-%d", i)
		a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "A", Ttl: durationpb.New(time.Hour)}))
		if err != nil {
			t.Fatal(err)
		}
		v := make([]byte, 1<<20)
		rand.Read(v)
		if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: name, Token: a.Msg.Lease.Token, Value: v})); err != nil {
			t.Fatal(err)
		}
	}
	// A client whose socket takes little (16 KiB receive buffer): the
	// node's sends block soon, with the stream held mid-way.
	small := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) }); err != nil {
			return err
		}
		return serr
	}}).DialContext}}
	mc := fencev1connect.NewMaintenanceServiceClient(small, url)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // before Close: ends the held stream without reading the rest
	first, err := mc.Backup(sctx, connect.NewRequest(&fencev1.BackupRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); first.Close() }()
	if !first.Receive() {
		t.Fatalf("the first backup sent nothing: %v", first.Err())
	}
	before := metricValues(t, url)
	second, err := mc.Backup(ctx, connect.NewRequest(&fencev1.BackupRequest{}))
	if err == nil {
		for second.Receive() {
		}
		err = second.Err()
		second.Close()
	}
	var limit *fence.ResourceExhaustedError
	if !errors.As(apierr.FromConnect(err), &limit) || limit.Limit != backupsLimit {
		t.Fatalf("a second backup while one streams: %v, want RESOURCE_EXHAUSTED on %q", err, backupsLimit)
	}
	after := metricValues(t, url)
	const name = `fence_resource_exhausted_total{limit="max_backups"}`
	if d := after[name] - before[name]; d != 1 {
		t.Errorf("%s moved by %v, want 1", name, d)
	}
	if other := `fence_resource_exhausted_total{limit="other"}`; after[other] != before[other] {
		t.Errorf("%s moved by %v, want 0", other, after[other]-before[other])
	}
}
