package server

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// F10: a second backup while one is being streamed is refused
// RESOURCE_EXHAUSTED and counted as
// fence_resource_exhausted_total{limit="max_backups"}, not "other". The
// first backup (8 MiB from a fake node, read through a socket with a 16
// KiB receive buffer) is held open mid-stream by not reading it.
func TestSecondBackupCountedAsMaxBackups(t *testing.T) {
	_, url := startServerDeps(t, Config{}, func(d *Deps) { d.Node = bigBackup{d.Node} })
	ctx := context.Background()
	// A client whose socket takes little (16 KiB receive buffer): the
	// node's sends block soon, with the stream held mid-way.
	small := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10) }); err != nil {
			return err
		}
		return serr
	}}).DialContext}}
	mc := fencev1connect.NewMaintenanceServiceClient(small, url)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // before Close: ends the held stream without reading the rest
	first, err := mc.Backup(sctx, connect.NewRequest(&fencev1.BackupRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); first.Close() }()
	if !first.Receive() {
		t.Fatalf("the first backup sent nothing: %v", first.Err())
	}
	before := metricValues(t, url)
	second, err := mc.Backup(ctx, connect.NewRequest(&fencev1.BackupRequest{}))
	if err == nil {
		for second.Receive() {
		}
		err = second.Err()
		second.Close()
	}
	var limit *fence.ResourceExhaustedError
	if !errors.As(apierr.FromConnect(err), &limit) || limit.Limit != backupsLimit {
		t.Fatalf("a second backup while one streams: %v, want RESOURCE_EXHAUSTED on %q", err, backupsLimit)
	}
	after := metricValues(t, url)
	const name = `fence_resource_exhausted_total{limit="max_backups"}`
	if d := after[name] - before[name]; d != 1 {
		t.Errorf("%s moved by %v, want 1", name, d)
	}
	if other := `fence_resource_exhausted_total{limit="other"}`; after[other] != before[other] {
		t.Errorf("%s moved by %v, want 0", other, after[other]-before[other])
	}
}

// bigBackup is a node whose backup is 8 MiB of random bytes (more than
// the sockets between a server and its client hold): with its client not
// reading, its stream is held mid-way.
type bigBackup struct{ Node }

func (n bigBackup) Backup(ctx context.Context) (*fencev1.BackupHeader, func(io.Writer) error, error) {
	hdr, _, err := n.Node.Backup(ctx)
	return hdr, func(w io.Writer) error {
		b := make([]byte, 64<<10)
		rand.Read(b)
		for range 128 {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	}, err
}
