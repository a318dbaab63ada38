package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/daemon"
)

// An embedded server in a temporary directory, as `fence lab` uses it.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	s, err := daemon.New(daemon.Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(ln)
	defer s.Shutdown(context.Background())

	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	locks := fencev1connect.NewLockServiceClient(hc, "http://"+ln.Addr().String())
	res, err := locks.Acquire(context.Background(), connect.NewRequest(&fencev1.AcquireRequest{
		Name: "sku-42", Owner: "worker-a", Ttl: durationpb.New(5 * time.Second),
	}))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Msg.Lease.Name, res.Msg.Lease.Token)
	// Output: sku-42 1
}
