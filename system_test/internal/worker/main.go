// Command worker is the story's worker as a separate process, for the system
// tests: it takes a lease from a Fence server, announces its token on stdout,
// waits for one line on stdin (the moment the test may SIGSTOP it), then
// makes one fenced write with that token and reports the outcome.
//
//	worker --server URL --lock NAME --ttl D [--wait D] --resource R --value V
//
// Output, one line each, in order:
//
//	acquired token=N
//	written token=N version=V        (exit 0)
//	refused reason=R message=...     (exit 4: a fencing refusal; 1 otherwise)
//
// It talks to the server with the generated Connect client over plain JSON,
// so it depends on nothing but the API.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:7420", "Fence server URL")
	lock := flag.String("lock", "", "lock name")
	owner := flag.String("owner", "worker", "owner label")
	ttl := flag.Duration("ttl", time.Second, "lease TTL")
	wait := flag.Duration("wait", 0, "how long to queue for the lock (0: try once)")
	resource := flag.String("resource", "", "fenced resource to write")
	value := flag.String("value", "", "value to write")
	flag.Parse()
	os.Exit(run(*server, *lock, *owner, *ttl, *wait, *resource, *value))
}

func run(server, lock, owner string, ttl, wait time.Duration, resource, value string) int {
	ctx := context.Background()
	opts := []connect.ClientOption{connect.WithProtoJSON()}
	locks := fencev1connect.NewLockServiceClient(http.DefaultClient, server, opts...)
	resources := fencev1connect.NewResourceServiceClient(http.DefaultClient, server, opts...)

	req := &fencev1.AcquireRequest{Name: lock, Owner: owner, Ttl: durationpb.New(ttl)}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	acq, err := locks.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		return refused(err)
	}
	token := acq.Msg.GetLease().GetToken()
	fmt.Printf("acquired token=%d\n", token)

	// The pause point: the test stops this process here, past its TTL.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Printf("error reading the go-ahead: %v\n", err)
		return 1
	}

	w, err := resources.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{
		Resource: resource, Token: token, Value: []byte(value),
	}))
	if err != nil {
		return refused(err)
	}
	fmt.Printf("written token=%d version=%d\n", token, w.Msg.GetState().GetVersion())
	return 0
}

// refused prints the refusal's reason and returns the CLI's exit code for it:
// 4 for a fencing refusal, 3 busy, 2 invalid, 1 anything else.
func refused(err error) int {
	reason := ""
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if m, derr := d.Value(); derr == nil {
				if ed, ok := m.(*fencev1.ErrorDetail); ok {
					reason = ed.GetReason()
				}
			}
		}
	}
	fmt.Printf("refused reason=%s message=%v\n", reason, err)
	switch reason {
	case "STALE_TOKEN", "NOT_HOLDER", "LEASE_EXPIRED", "UNKNOWN_TOKEN":
		return 4
	case "BUSY":
		return 3
	case "INVALID_ARGUMENT":
		return 2
	}
	return 1
}
