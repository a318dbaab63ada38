package raftstore

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// closedByPeer reports whether c is closed by the other side within a
// second (a read ends with EOF or a reset rather than timing out).
func closedByPeer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// The raft port bounds the connections waiting for their header byte and
// the raft connections open at once (adversary: 20,500 idle raft
// connections took a leader to its file descriptor limit): one past a
// limit is closed at once, and a closed one gives its place back.
func TestMuxConnLimits(t *testing.T) {
	m, err := Listen("127.0.0.1:0", "", WithConnLimits(2, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	trans := m.Transport(TransportConfig{})
	defer trans.(raft.WithClose).Close()

	dial := func(header []byte) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", m.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if len(header) > 0 {
			if _, err := c.Write(header); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(50 * time.Millisecond) // let the mux sort it
		return c
	}
	// Waiting for a header byte: two fit, the third is closed.
	s1, s2 := dial(nil), dial(nil)
	if s3 := dial(nil); !closedByPeer(t, s3) {
		t.Fatal("a third silent connection was kept past the limit of 2")
	}
	s1.Close()
	s2.Close()
	time.Sleep(50 * time.Millisecond)

	// Raft: two fit (the transport holds them), the third is closed; when
	// one closes, a new one fits again.
	r1, _ := dial([]byte{HeaderRaft}), dial([]byte{HeaderRaft})
	if closedByPeer(t, r1) {
		t.Fatal("a raft connection within the limit was closed")
	}
	if r3 := dial([]byte{HeaderRaft}); !closedByPeer(t, r3) {
		t.Fatal("a third raft connection was kept past the limit of 2")
	}
	r1.Close()
	time.Sleep(100 * time.Millisecond) // the transport sees EOF and closes its side
	if r4 := dial([]byte{HeaderRaft}); closedByPeer(t, r4) {
		t.Fatal("a raft connection was refused after one under the limit closed")
	}
	// API: one fits, the second is closed.
	m.APIListener()
	dial([]byte{HeaderAPI})
	if a2 := dial([]byte{HeaderAPI}); !closedByPeer(t, a2) {
		t.Fatal("a second API connection was kept past the limit of 1")
	}
}
