package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/backup"
)

// MaintenanceService.Backup on a real node, through Connect (HTTP/1.1;
// protobuf and JSON) and gRPC (h2c): the messages' data, in order, is a
// backup file that verifies; each message holds at most 64 KiB; only the
// first carries the header, which is the file's and matches the node (id,
// counter, cluster id, applied index).
func TestBackupHandler(t *testing.T) {
	s, url := startServerOnNode(t, Config{})
	ctx := context.Background()
	c := protocols(url)[0]
	var last uint64
	for i := range 3 { // 3 × 100 KiB: a backup of several messages
		name := "bk-" + string(rune('a'+i))
		a, err := c.locks.Acquire(ctx, connect.NewRequest(&fencev1.AcquireRequest{Name: name, Owner: "A", Ttl: durationpb.New(time.Hour)}))
		if err != nil {
			t.Fatal(err)
		}
		v := make([]byte, 100<<10)
		rand.Read(v)
		if _, err := c.res.Write(ctx, connect.NewRequest(&fencev1.WriteRequest{Resource: name, Token: a.Msg.Lease.Token, Value: v})); err != nil {
			t.Fatal(err)
		}
		last = a.Msg.Lease.Token
	}
	for _, p := range []struct {
		name string
		mc   fencev1connect.MaintenanceServiceClient
	}{
		{"connect", fencev1connect.NewMaintenanceServiceClient(&http.Client{}, url)},
		{"connect-json", fencev1connect.NewMaintenanceServiceClient(&http.Client{}, url, connect.WithProtoJSON())},
		{"grpc-h2c", fencev1connect.NewMaintenanceServiceClient(h2cClient(), url, connect.WithGRPC())},
	} {
		t.Run(p.name, func(t *testing.T) {
			st, err := p.mc.Backup(ctx, connect.NewRequest(&fencev1.BackupRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var file bytes.Buffer
			var hdr *fencev1.BackupHeader
			msgs := 0
			for st.Receive() {
				m := st.Msg()
				if (msgs == 0) != (m.GetHeader() != nil) {
					t.Fatalf("message %d has header %v: want one on the first message only", msgs, m.GetHeader())
				}
				if msgs == 0 {
					hdr = m.GetHeader()
				}
				if len(m.GetData()) > 64<<10 || len(m.GetData()) == 0 {
					t.Fatalf("message %d holds %d bytes: want 1 to 64 KiB", msgs, len(m.GetData()))
				}
				file.Write(m.GetData())
				msgs++
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			h, tr, err := backup.Verify(bytes.NewReader(file.Bytes()))
			if err != nil {
				t.Fatalf("%d messages, %d bytes: %v", msgs, file.Len(), err)
			}
			ns := nodeOf(s).Status()
			switch {
			case msgs < 5 || tr.StateBytes < 300<<10:
				t.Fatalf("%d messages, trailer %+v: want the 300 KiB of values in several", msgs, tr)
			case hdr.GetFormat() != backup.FormatVersion || hdr.GetNodeId() != h.NodeID || hdr.GetClusterId() != h.ClusterID ||
				hdr.GetAppliedIndex() != h.AppliedIndex || hdr.GetTerm() != h.Term || hdr.GetLastToken() != uint64(h.LastToken) ||
				hdr.GetServerTime().AsDuration() != time.Duration(h.ServerTimeNS) || hdr.GetWallUnixMs() != h.WallUnixMS ||
				hdr.GetRole() != h.Role || hdr.GetVersion() != h.Version:
				t.Fatalf("streamed header %v, file header %+v", hdr, h)
			case h.LastToken != ns.LastToken || uint64(h.LastToken) != last || h.NodeID != nodeOf(s).ID() || h.ClusterID == "" || h.ClusterID != nodeOf(s).ClusterID() ||
				h.AppliedIndex == 0 || h.AppliedIndex > ns.AppliedIndex:
				t.Fatalf("file header %+v, node status %+v, last grant %d", h, ns, last)
			}
		})
	}
}
