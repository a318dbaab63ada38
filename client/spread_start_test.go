package client

import "testing"

// Without a leader to go to, the Clients of one process start at
// successive endpoints: 9 Clients over 3 endpoints start 3 at each, not 9
// at the first.
func TestClientsStartSpreadOverEndpoints(t *testing.T) {
	counts := make([]int, 3)
	for range 9 {
		c, err := New("http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3", WithoutSession())
		if err != nil {
			t.Fatal(err)
		}
		counts[c.cur.Load()]++
		_ = c.Close()
	}
	for i, k := range counts {
		if k != 3 {
			t.Errorf("endpoint %d: %d Clients start there, want 3 (starts: %v)", i, k, counts)
		}
	}
}
