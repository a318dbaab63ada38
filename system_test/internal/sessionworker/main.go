// Command sessionworker holds or waits for many locks on one Fence session,
// for the system tests. It speaks only the API (the generated Connect
// client, unary calls over h2c), so what it shows is the server's and the
// store's behaviour, not the Go client's: a paused holder that does not
// check its own leases still has every write refused at the store.
//
//	sessionworker hold --server URL --prefix P --n N --ttl D
//	sessionworker wait --server URL --prefix P --n N --wait D
//
// hold opens a session with TTL D, keeps it alive (a keepalive every D/4),
// takes locks P0..P(N-1) bound to it, writes each token to resource P<i>
// ("holder"), prints
//
//	held n=N session=S min=T max=T
//
// and waits for one line on stdin (the test SIGSTOPs it before sending
// that line and SIGCONTs it after). It then writes "late" to every P<i>
// with the token it was granted and prints
//
//	wrote accepted=A stale=S other=O
//
// wait opens a session (TTL 30s, kept alive), queues a session-bound
// acquire with wait D on every lock, and as each is granted writes its
// token to P<i> ("waiter"). Once every lock is held it prints
//
//	got n=N min=T max=T
//
// and then idles until killed. Errors print "error ..." and exit 1.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

type api struct {
	sessions  fencev1connect.SessionServiceClient
	locks     fencev1connect.LockServiceClient
	resources fencev1connect.ResourceServiceClient
}

func h2c() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// newAPI gives the session calls a connection of their own: keepalives
// must not queue behind thousands of waiting acquires.
func newAPI(server string) *api {
	h2c, keep := h2c(), h2c()
	return &api{
		sessions:  fencev1connect.NewSessionServiceClient(keep, server),
		locks:     fencev1connect.NewLockServiceClient(h2c, server),
		resources: fencev1connect.NewResourceServiceClient(h2c, server),
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Println("error usage: sessionworker hold|wait [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	server := fs.String("server", "http://127.0.0.1:7420", "Fence server URL")
	prefix := fs.String("prefix", "s/", "lock and resource name prefix")
	n := fs.Int("n", 100, "number of locks")
	ttl := fs.Duration("ttl", 2*time.Second, "session TTL (hold)")
	wait := fs.Duration("wait", time.Minute, "how long each acquire waits (wait)")
	fs.Parse(os.Args[2:])
	a := newAPI(*server)
	var err error
	switch mode {
	case "hold":
		err = a.hold(*prefix, *n, *ttl)
	case "wait":
		err = a.wait(*prefix, *n, *wait)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
}

// open opens a session and keeps it alive every ttl/4 until the process
// ends (a refused keepalive is printed: the session has ended).
func (a *api) open(ttl time.Duration) (uint64, error) {
	ctx := context.Background()
	resp, err := a.sessions.Open(ctx, connect.NewRequest(&fencev1.OpenSessionRequest{Ttl: durationpb.New(ttl)}))
	if err != nil {
		return 0, fmt.Errorf("open session: %w", err)
	}
	id := resp.Msg.GetSession().GetId()
	go func() {
		for range time.Tick(ttl / 4) {
			_, err := a.sessions.KeepAlive(ctx, connect.NewRequest(&fencev1.KeepAliveRequest{Session: id}))
			if err != nil {
				fmt.Printf("keepalive refused: %v\n", err)
			}
		}
	}()
	return id, nil
}

// each runs fn(i) for i in [0, n) on 64 goroutines and returns the first
// error.
func each(n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func (a *api) acquire(session uint64, name, owner string, wait time.Duration) (uint64, error) {
	req := &fencev1.AcquireRequest{Name: name, Owner: owner, Session: &fencev1.SessionRef{Id: session}}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	resp, err := a.locks.Acquire(context.Background(), connect.NewRequest(req))
	if err != nil {
		return 0, fmt.Errorf("acquire %s: %w", name, err)
	}
	return resp.Msg.GetLease().GetToken(), nil
}

func (a *api) write(name string, token uint64, value string) error {
	_, err := a.resources.Write(context.Background(), connect.NewRequest(&fencev1.WriteRequest{
		Resource: name, Token: token, Value: []byte(value),
	}))
	return err
}

func span(tokens []uint64) (lo, hi uint64) {
	lo = ^uint64(0)
	for _, t := range tokens {
		lo, hi = min(lo, t), max(hi, t)
	}
	return lo, hi
}

func (a *api) hold(prefix string, n int, ttl time.Duration) error {
	session, err := a.open(ttl)
	if err != nil {
		return err
	}
	tokens := make([]uint64, n)
	err = each(n, func(i int) error {
		name := prefix + strconv.Itoa(i)
		t, err := a.acquire(session, name, "holder", 0)
		if err != nil {
			return err
		}
		tokens[i] = t
		if err := a.write(name, t, "holder"); err != nil {
			return fmt.Errorf("holder's first write to %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	lo, hi := span(tokens)
	fmt.Printf("held n=%d session=%d min=%d max=%d\n", n, session, lo, hi)

	// The pause point: the test SIGSTOPs this process here, past the
	// session's TTL, and sends the line after SIGCONT.
	var line [1]byte
	if _, err := os.Stdin.Read(line[:]); err != nil {
		return fmt.Errorf("reading the go-ahead: %w", err)
	}
	var accepted, stale, other atomic.Int64
	each(n, func(i int) error {
		err := a.write(prefix+strconv.Itoa(i), tokens[i], "late")
		switch {
		case err == nil:
			accepted.Add(1)
		case reason(err) == "STALE_TOKEN":
			stale.Add(1)
		default:
			other.Add(1)
			fmt.Printf("late write %d: %v\n", i, err)
		}
		return nil
	})
	fmt.Printf("wrote accepted=%d stale=%d other=%d\n", accepted.Load(), stale.Load(), other.Load())
	return nil
}

func (a *api) wait(prefix string, n int, wait time.Duration) error {
	session, err := a.open(30 * time.Second)
	if err != nil {
		return err
	}
	tokens := make([]uint64, n)
	err = eachConcurrent(n, func(i int) error {
		name := prefix + strconv.Itoa(i)
		t, err := a.acquire(session, name, "waiter", wait)
		if err != nil {
			return err
		}
		tokens[i] = t
		if err := a.write(name, t, "waiter"); err != nil {
			return fmt.Errorf("waiter's write to %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	lo, hi := span(tokens)
	fmt.Printf("got n=%d min=%d max=%d\n", n, lo, hi)
	select {}
}

// eachConcurrent runs fn(i) for every i at once (each waits for its lock).
func eachConcurrent(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// reason is the ErrorDetail reason of a refusal ("" if none).
func reason(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		for _, d := range ce.Details() {
			if m, derr := d.Value(); derr == nil {
				if ed, ok := m.(*fencev1.ErrorDetail); ok {
					return ed.GetReason()
				}
			}
		}
	}
	return ""
}
