package testutil

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fmt.Fprintf(&b, "%d", i)
		}()
	}
	wg.Wait()
	if len(b.String()) != 8 {
		t.Fatalf("buffer holds %q, want 8 digits", b.String())
	}
}

func TestFreeAddrBindable(t *testing.T) {
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	l.Close()
}

// A test that picks several addresses (a cluster's raft and API ports) must
// never get the same one twice, although each was closed before the next
// pick: the kernel reuses closed ephemeral ports.
func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 3000 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("address %s handed out twice", a)
		}
		seen[a] = true
	}
}
