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
