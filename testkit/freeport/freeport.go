package freeport

import (
	"fmt"
	"net"
	"sync"
)

// handedOut is every port Pick returned in this process. The kernel may
// hand the same ephemeral port to two successive listens on port 0 once the
// first is closed, so two nodes of one test could get the same raft address;
// a port is therefore given out at most once per process.
var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
)

// Pick returns a loopback address (127.0.0.1:port) that was free a
// moment ago and that no earlier Pick of this process
// returned. Another process may still take it before the caller binds it:
// callers that start a server process on it retry on "address already in use".
func Pick() (string, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	// Keep the refused listeners open until a new port is found, so the
	// kernel cannot give the same one back on the next try.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if !handedOut[port] {
			handedOut[port] = true
			return l.Addr().String(), nil
		}
	}
	return "", fmt.Errorf("no loopback port not handed out before in 1000 tries")
}
