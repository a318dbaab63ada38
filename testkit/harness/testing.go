package harness

import (
	"context"
	"path/filepath"
	"testing"
)

// The helpers here are for tests: they fail t on an error and clean up
// with t.Cleanup. Everything else in the package returns errors, for the
// chaos and bench runners.

// FenceBinaryT is FenceBinary, failing t if the build fails.
func FenceBinaryT(t testing.TB) string {
	t.Helper()
	bin, err := FenceBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// StartT starts a server for t (DataDir default: a fresh t.TempDir()/data)
// and fails t if it does not become ready. At the end of the test the
// process is killed, a data race it reported fails t, and its output is
// logged if t failed.
func StartT(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = filepath.Join(t.TempDir(), "data")
	}
	if cfg.Bin == "" {
		cfg.Bin = FenceBinaryT(t)
	}
	s, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupServer(t, s) })
	if err := s.firstStart(context.Background(), !cfg.NoWait); err != nil {
		t.Fatal(err)
	}
	return s
}

func cleanupServer(t testing.TB, s *Server) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if HasRace(s.Log()) {
		t.Errorf("%s reported a data race", s.ID())
	}
	if t.Failed() {
		t.Logf("%s output (data dir %s):\n%s", s.ID(), s.DataDir(), s.Log())
	}
}

// StartClusterT starts a cluster for t (Dir default: a fresh t.TempDir())
// and fails t if it does not become ready; its nodes are cleaned up as
// StartT's.
func StartClusterT(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Bin == "" {
		cfg.Bin = FenceBinaryT(t)
	}
	c, err := StartCluster(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes() {
			cleanupServer(t, n)
		}
		if t.Failed() {
			t.Logf("cluster at the end:\n%s", c)
		}
	})
	return c
}
