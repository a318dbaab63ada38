//go:build e2e

package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
)

// healthOf asks url's grpc.health.v1.Health/Check about service over gRPC
// (h2c), as a Kubernetes gRPC probe does.
func healthOf(t *testing.T, url, service string) (grpchealth.Status, error) {
	t.Helper()
	hc := h2cClient()
	defer hc.CloseIdleConnections()
	c := grpchealth.NewClient(hc, url, connect.WithGRPC())
	res, err := c.Check(context.Background(), &grpchealth.CheckRequest{Service: service})
	if err != nil {
		return 0, err
	}
	return res.Status, nil
}

func readyzCode(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// checkHealthAll checks that the server ("") and every fence.v1 service
// report want, that an unknown name is NOT_FOUND, and that /readyz agrees.
func checkHealthAll(t *testing.T, url string, want grpchealth.Status) {
	t.Helper()
	for _, svc := range append([]string{""}, fenceServices...) {
		got, err := healthOf(t, url, svc)
		if err != nil || got != want {
			t.Fatalf("Health/Check(%q) = %v, %v; want %v", svc, got, err, want)
		}
	}
	if _, err := healthOf(t, url, "fence.v1.NoSuchService"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Health/Check of an unknown service: %v, want NotFound", err)
	}
	wantCode := http.StatusOK
	if want != grpchealth.StatusServing {
		wantCode = http.StatusServiceUnavailable
	}
	if code := readyzCode(t, url); code != wantCode {
		t.Fatalf("/readyz = %d while Health says %v", code, want)
	}
}

// grpc.health.v1 says SERVING exactly when /readyz answers 200: a ready
// node that is ready; NOT_SERVING for one that is not ready and for one
// shutting down.
func TestGRPCHealthFollowsReadiness(t *testing.T) {
	t.Parallel()
	t.Run("ready then draining", func(t *testing.T) {
		t.Parallel()
		s, url := startServer(t)
		checkHealthAll(t, url, grpchealth.StatusServing)
		// Also over Connect with JSON (curl, a browser).
		c := grpchealth.NewClient(http.DefaultClient, url, connect.WithProtoJSON())
		if res, err := c.Check(context.Background(), &grpchealth.CheckRequest{}); err != nil || res.Status != grpchealth.StatusServing {
			t.Fatalf("Health/Check over Connect JSON = %v, %v", res, err)
		}
		s.drainOnce.Do(func() { close(s.drainC) })
		checkHealthAll(t, url, grpchealth.StatusNotServing)
	})
}

// grpcurlVersion is the grpcurl the test runs (go install'ed into
// bin/tools by the first run; .ci/run builds it before make test).
const grpcurlVersion = "v1.9.3"

var grpcurlOnce struct {
	sync.Once
	path string
	err  error
}

// grpcurl returns the path of bin/tools/grpcurl-VERSION, building it with
// go install when it is not there.
func grpcurl(t *testing.T) string {
	t.Helper()
	grpcurlOnce.Do(func() {
		root, err := filepath.Abs("..")
		if err != nil {
			grpcurlOnce.err = err
			return
		}
		p := filepath.Join(root, "bin", "tools", "grpcurl-"+grpcurlVersion)
		if _, err := os.Stat(p); err == nil {
			grpcurlOnce.path = p
			return
		}
		gobin, err := os.MkdirTemp(filepath.Join(root, "bin"), ".grpcurl-")
		if err != nil {
			if err = os.MkdirAll(filepath.Join(root, "bin", "tools"), 0o755); err == nil {
				gobin, err = os.MkdirTemp(filepath.Join(root, "bin"), ".grpcurl-")
			}
			if err != nil {
				grpcurlOnce.err = err
				return
			}
		}
		defer os.RemoveAll(gobin)
		cmd := exec.Command("go", "install", "github.com/fullstorydev/grpcurl/cmd/grpcurl@"+grpcurlVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			grpcurlOnce.err = errors.New("go install grpcurl: " + err.Error() + "\n" + string(out))
			return
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			grpcurlOnce.err = err
			return
		}
		if err := os.Rename(filepath.Join(gobin, "grpcurl"), p); err != nil {
			grpcurlOnce.err = err
			return
		}
		grpcurlOnce.path = p
	})
	if grpcurlOnce.err != nil {
		t.Fatal(grpcurlOnce.err)
	}
	return grpcurlOnce.path
}

// grpcurl, a client that knows nothing of Fence but what reflection tells
// it: list the services, check health, describe a method and call it.
func TestGrpcurlListAndHealthCheck(t *testing.T) {
	t.Parallel()
	bin := grpcurl(t)
	_, url := startServer(t)
	addr := strings.TrimPrefix(url, "http://")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	got := strings.Fields(run(addr, "list"))
	want := []string{
		"fence.v1.AuthService", "fence.v1.ClusterService", "fence.v1.KeyService", "fence.v1.LockService", "fence.v1.MaintenanceService", "fence.v1.OperatorService",
		"fence.v1.ResourceService", "fence.v1.SessionService", "grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("grpcurl list = %q, want %q", got, want)
	}
	if out := run(addr, "list", "fence.v1.LockService"); !strings.Contains(out, "fence.v1.LockService.Acquire") {
		t.Fatalf("grpcurl list fence.v1.LockService:\n%s", out)
	}
	if out := run(addr, "grpc.health.v1.Health/Check"); !strings.Contains(out, `"status": "SERVING"`) {
		t.Fatalf("Health/Check:\n%s", out)
	}
	if out := run("-d", `{"service":"fence.v1.LockService"}`, addr, "grpc.health.v1.Health/Check"); !strings.Contains(out, `"status": "SERVING"`) {
		t.Fatalf("Health/Check fence.v1.LockService:\n%s", out)
	}
	// The message types come from reflection too: describe, then a call
	// whose JSON grpcurl turns into protobuf with them.
	if out := run(addr, "describe", "fence.v1.AcquireRequest"); !strings.Contains(out, "google.protobuf.Duration ttl") {
		t.Fatalf("describe fence.v1.AcquireRequest:\n%s", out)
	}
	if out := run("-d", `{"name":"grpcurl","ttl":"30s"}`, addr, "fence.v1.LockService/Acquire"); !strings.Contains(out, `"name": "grpcurl"`) || !strings.Contains(out, `"token"`) {
		t.Fatalf("Acquire through grpcurl:\n%s", out)
	}
}
