//go:build e2e

package system_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// api is a typed client of one server over one protocol.
type api struct {
	Locks     fencev1connect.LockServiceClient
	Resources fencev1connect.ResourceServiceClient
}

// connectAPI talks the Connect protocol with protobuf bodies over HTTP/1.1.
func connectAPI(srv *fenceServer) api {
	hc := &http.Client{Timeout: hangGuard}
	return api{
		Locks:     fencev1connect.NewLockServiceClient(hc, srv.URL()),
		Resources: fencev1connect.NewResourceServiceClient(hc, srv.URL()),
	}
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge), as gRPC clients do
// against a plaintext server.
func h2cClient() *http.Client {
	return &http.Client{Timeout: hangGuard, Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

// grpcAPI talks gRPC over h2c.
func grpcAPI(srv *fenceServer) api {
	hc := h2cClient()
	return api{
		Locks:     fencev1connect.NewLockServiceClient(hc, srv.URL(), connect.WithGRPC()),
		Resources: fencev1connect.NewResourceServiceClient(hc, srv.URL(), connect.WithGRPC()),
	}
}

func (a api) acquire(ctx context.Context, name, owner string, ttl, wait time.Duration) (*fencev1.Lease, error) {
	req := &fencev1.AcquireRequest{Name: name, Owner: owner, Ttl: durationpb.New(ttl)}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	resp, err := a.Locks.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetLease(), nil
}

func (a api) release(ctx context.Context, name string, token uint64) error {
	_, err := a.Locks.Release(ctx, connect.NewRequest(&fencev1.ReleaseRequest{Name: name, Token: token}))
	return err
}

func (a api) write(ctx context.Context, resource string, token uint64, value string) (*fencev1.ResourceState, error) {
	resp, err := a.Resources.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{
		Resource: resource, Token: token, Value: []byte(value),
	}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetState(), nil
}

func (a api) read(ctx context.Context, resource string) (*fencev1.ResourceState, error) {
	resp, err := a.Resources.Read(ctx, connect.NewRequest(&fencev1.ReadRequest{Resource: resource}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetState(), nil
}

func (a api) get(ctx context.Context, name string) (*fencev1.LockInfo, error) {
	resp, err := a.Locks.Get(ctx, connect.NewRequest(&fencev1.GetRequest{Name: name}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetLock(), nil
}

// errorDetail returns the fence.v1.ErrorDetail of a Connect error, or nil.
func errorDetail(err error) *fencev1.ErrorDetail {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	for _, d := range ce.Details() {
		m, derr := d.Value()
		if derr != nil {
			continue
		}
		if ed, ok := m.(*fencev1.ErrorDetail); ok {
			return ed
		}
	}
	return nil
}

// jsonError is a Connect error as plain JSON carries it.
type jsonError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string          `json:"type"`
		Value string          `json:"value"` // base64 of the protobuf message
		Debug json.RawMessage `json:"debug"`
	} `json:"details"`
}

// postJSON sends body to path as a plain JSON POST, the way curl does, and
// returns the HTTP status and the response body.
func postJSON(t testing.TB, srv *fenceServer, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL()+path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading body: %v", path, err)
	}
	return resp.StatusCode, out
}

// decodeJSONError parses a Connect JSON error body and its ErrorDetail (nil
// when the error carries none).
func decodeJSONError(body []byte) (*jsonError, *fencev1.ErrorDetail, error) {
	var je jsonError
	if err := json.Unmarshal(body, &je); err != nil {
		return nil, nil, fmt.Errorf("error body is not JSON: %v: %q", err, body)
	}
	for _, d := range je.Details {
		if d.Type != "fence.v1.ErrorDetail" {
			continue
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			return &je, nil, fmt.Errorf("detail value is not base64: %v", err)
		}
		var ed fencev1.ErrorDetail
		if err := proto.Unmarshal(raw, &ed); err != nil {
			return &je, nil, fmt.Errorf("detail value is not an ErrorDetail: %v", err)
		}
		return &je, &ed, nil
	}
	return &je, nil, nil
}
