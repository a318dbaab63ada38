package daemon

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/grpchealth"
)

// A node still joining a cluster (no leader known: a real not-ready node)
// answers NOT_SERVING to gRPC health and 503 on /readyz.
func TestHealthNotServingWhileJoining(t *testing.T) {
	cfg := clusterConfig(t, "n2", ClusterConfig{Join: []string{"http://127.0.0.1:1"}})
	n := startRun(t, cfg) // serves its client port while it asks to join
	res, err := grpchealth.NewClient(http.DefaultClient, n.url).Check(context.Background(), &grpchealth.CheckRequest{})
	if err != nil || res.Status != grpchealth.StatusNotServing {
		t.Fatalf("Health/Check while joining = %v, %v; want NOT_SERVING", res, err)
	}
	r, err := http.Get(n.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while joining = %d, want 503", r.StatusCode)
	}
}
