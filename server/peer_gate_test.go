package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/cluster/clusterapi"
	"github.com/fenceworks/fence/state"
	"github.com/fenceworks/fence/testkit/testutil"
)

// certListener hands out connections whose peer certificate names node id
// (as raftstore's peer TLS connections do).
type certListener struct {
	net.Listener
	id string
}

type certConn struct {
	net.Conn
	id string
}

func (c certConn) PeerNodeID() string { return c.id }

func (l certListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return certConn{c, l.id}, nil
}

// A call through the peer port is a peer's, trusted (an admin's rights,
// the principal it forwards) only while the node its certificate names is
// admitted (Deps.PeerAdmitted: a member of the configuration), asked at
// every call: a spare certificate of the CA, or a member removed while its
// connection stays open, is refused PERMISSION_DENIED, audited with its
// node id.
func TestPeerPortServesMembersOnly(t *testing.T) {
	members := map[string]bool{"n2": true}
	logs := &testutil.Buffer{}
	s, err := newOverFakeWith(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))}, state.Config{}, func(d *Deps) {
		d.PeerAdmitted = func(id string) bool { return members[id] }
	})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(id string) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.ServePeers(certListener{ln, id})
		t.Cleanup(func() { ln.Close() })
		return "http://" + ln.Addr().String()
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	backup := func(url string) error { return peerBackup(ctx, url) }
	n2, n9 := serve("n2"), serve("n9")
	if err := backup(n2); err != nil {
		t.Fatalf("a backup asked by member n2 through the peer port: %v", err)
	}
	var pd *fence.PermissionDeniedError
	if err := backup(n9); !errors.As(apierr.FromConnect(err), &pd) || pd.Principal != "node:n9" {
		t.Fatalf("a backup asked by n9, no member, through the peer port: %v, want PERMISSION_DENIED naming node:n9", err)
	}
	// n2 leaves the configuration: its next call is refused.
	delete(members, "n2")
	if err := backup(n2); !errors.As(apierr.FromConnect(err), &pd) || pd.Principal != "node:n2" {
		t.Fatalf("a backup asked by n2 after its removal: %v, want PERMISSION_DENIED", err)
	}
	if out := logs.String(); !strings.Contains(out, "principal=node:n9") || !strings.Contains(out, "event=refused") {
		t.Fatalf("the refusal is not audited with the node id:\n%s", out)
	}
	// The member's backup is audited as an admin action, naming it.
	if out := logs.String(); !strings.Contains(out, "event=admin method=Backup principal=node") || !strings.Contains(out, "peer_node=n2") {
		t.Fatalf("a member's backup through the peer port is not audited with its node:\n%s", out)
	}
}

// peerBackup streams a backup from the server at url as a peer asks for
// one (forwarded, as an admin, naming no principal) and returns how it
// ended.
func peerBackup(ctx context.Context, url string) error {
	req := connect.NewRequest(&fencev1.BackupRequest{})
	req.Header().Set(clusterapi.ForwardedHeader, "1")
	req.Header().Set(clusterapi.PrincipalHeader, "")
	req.Header().Set(clusterapi.AdminHeader, "1")
	st, err := fencev1connect.NewMaintenanceServiceClient(&http.Client{}, url).Backup(ctx, req)
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Receive() {
	}
	return st.Err()
}
