package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fenceworks/fence/daemon"
)

// serverURL is the embedded server every test and example talks to.
var serverURL string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fence-client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	url, stop, err := startServer(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		os.Exit(1)
	}
	serverURL = url
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startServer runs a real server on dir and a free loopback port; stop shuts
// it down.
func startServer(dir string) (url string, stop func(), err error) {
	s, err := daemon.New(daemon.Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return "", nil, err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
	}, nil
}

// testServer starts a server of the test's own, stopped at cleanup (or
// earlier by calling stop; stopping twice is fine).
func testServer(t *testing.T) (url string, stop func()) {
	t.Helper()
	url, stopFn, err := startServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if !done {
			done = true
			stopFn()
		}
	}
	t.Cleanup(stop)
	return url, stop
}
