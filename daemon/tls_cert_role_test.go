package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/internal/certgen"
)

// A role bound to a client certificate's CN: with auth on, a client that
// presents a verified certificate named "worker" and no token is the
// principal cert:worker with the role's permissions; a certificate with
// another name, or one from another CA sent anyway, is not (the first is
// unauthenticated, the second refused in the handshake); a bearer token
// wins over the certificate.
func TestTLSCertificateBoundRole(t *testing.T) {
	p := newPKI(t)
	_, addr := startTLS(t, Config{CertFile: p.certFile, KeyFile: p.keyFile, TrustedCAFile: p.caFile})
	url := "https://" + addr
	ctx := context.Background()
	admin := &http.Client{Transport: &http.Transport{TLSClientConfig: p.clientTLS()}}
	defer admin.CloseIdleConnections()
	auth := fencev1connect.NewAuthServiceClient(admin, url)
	boot, err := auth.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	secret := boot.Msg.GetSecret()
	for _, call := range []func() error{
		func() error {
			_, err := auth.GrantRole(ctx, withBearer(&fencev1.GrantRoleRequest{Role: "workers", Permissions: []string{"lock:jobs/"}}, secret))
			return err
		},
		func() error {
			_, err := auth.BindRole(ctx, withBearer(&fencev1.BindRoleRequest{Role: "workers", CertName: "worker"}, secret))
			return err
		},
		func() error {
			_, err := auth.SetEnabled(ctx, withBearer(&fencev1.AuthSetEnabledRequest{Enabled: true}, secret))
			return err
		},
	} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	stranger, err := p.ca.TLSCertificate(certgen.Options{CommonName: "stranger", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(certs []tls.Certificate, bearer string) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.clientTLS(certs...)}}
		defer hc.CloseIdleConnections()
		_, err := fencev1connect.NewLockServiceClient(hc, url).Acquire(ctx,
			withBearer(&fencev1.AcquireRequest{Name: "jobs/" + time.Now().Format("150405.000000000"), Owner: "w", Ttl: durationpb.New(time.Minute)}, bearer))
		return apierr.FromConnect(err)
	}
	if err := acquire([]tls.Certificate{p.client}, ""); err != nil {
		t.Fatalf("the worker certificate: %v", err)
	}
	var un *fence.UnauthenticatedError
	if err := acquire([]tls.Certificate{stranger}, ""); !errors.As(err, &un) {
		t.Fatalf("a certificate bound to no role: %v, want UNAUTHENTICATED", err)
	}
	if err := acquire(nil, ""); !errors.As(err, &un) {
		t.Fatalf("no certificate, no token: %v, want UNAUTHENTICATED", err)
	}
	if err := acquire([]tls.Certificate{p.otherClient, {}}, ""); err == nil {
		t.Fatal("a worker certificate from another CA was served")
	}
	// A token wins over the certificate: a bad token is refused even with
	// the worker certificate.
	if err := acquire([]tls.Certificate{p.client}, "garbage"); !errors.As(err, &un) {
		t.Fatalf("a bad token with the worker certificate: %v, want UNAUTHENTICATED", err)
	}
	if _, err := auth.Status(ctx, connect.NewRequest(&fencev1.AuthStatusRequest{})); err == nil {
		t.Fatal("status without credentials was served")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.clientTLS(p.client)}}
	defer hc.CloseIdleConnections()
	who, err := fencev1connect.NewAuthServiceClient(hc, url).Status(ctx, connect.NewRequest(&fencev1.AuthStatusRequest{}))
	if err != nil || who.Msg.GetPrincipal() != "cert:worker" || who.Msg.GetAdmin() {
		t.Fatalf("status with the worker certificate: %v, %v; want cert:worker, not admin", who, err)
	}
}
