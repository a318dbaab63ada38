package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// backupChunk bounds the data of one BackupResponse.
const backupChunk = 64 << 10

// maintenanceService is the MaintenanceService: calls that act on the node
// they are sent to, never forwarded (a follower backs up what it applied).
// One backup runs at a time (slot): each holds a copy of the whole state
// until it is sent, so a second one is refused (resource_exhausted) rather
// than doubling the memory a backup takes.
type maintenanceService struct {
	s    *Server
	slot chan struct{}
}

// maxBackups is how many backups a node streams at once; a backup beyond
// it is refused RESOURCE_EXHAUSTED on backupsLimit, counted in
// fence_resource_exhausted_total{limit="max_backups"} (limitLabel).
const maxBackups = 1

// backupsLimit is the Limit of that refusal.
const backupsLimit = "backups in progress on this node"

// maintenanceRoute is the MaintenanceService's route on the API router.
// Its handler gets a way to push the write deadline back before each
// message it sends (sendDeadline): limitWrites gives a reply WriteTimeout
// from the request's start, which would cut a long backup; a stream is
// instead cut when one message cannot be written within WriteTimeout (a
// client that stopped reading).
func (s *Server) maintenanceRoute(opts []connect.HandlerOption) route {
	// A backup is not compressed: gzip would cost the node CPU its
	// applies need, for bytes that go to a file once (compress the file).
	opts = append(slices.Clip(opts), connect.WithCompressMinBytes(math.MaxInt))
	path, h := fencev1connect.NewMaintenanceServiceHandler(maintenanceService{s: s, slot: make(chan struct{}, maxBackups)}, opts...)
	return route{prefix: path, h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		timeout := s.cfg.WriteTimeout
		extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(timeout)) }
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sendDeadlineKey{}, extend)))
	})}
}

type sendDeadlineKey struct{}

// sendDeadline pushes the write deadline of the request of ctx to
// WriteTimeout from now (a no-op outside maintenanceRoute).
func sendDeadline(ctx context.Context) {
	if f, ok := ctx.Value(sendDeadlineKey{}).(func()); ok {
		f()
	}
}

// Backup streams a backup file of the node's state as of one applied
// index (Node.Backup copies the state; applies wait for the copy, not for
// the stream): the bytes in order, at most backupChunk per message,
// the header's facts with the first. The file is encoded while it is sent,
// never held whole in memory. A client that goes away (or stops reading
// for WriteTimeout) ends the stream; the copy is dropped.
func (m maintenanceService) Backup(ctx context.Context, req *connect.Request[fencev1.BackupRequest], stream *connect.ServerStream[fencev1.BackupResponse]) error {
	ctx, err := m.s.requireAdmin(ctx, "Backup")
	if err != nil {
		return m.s.connectError(ctx, "Backup", err)
	}
	select {
	case m.slot <- struct{}{}:
		defer func() { <-m.slot }()
	default:
		return m.error(ctx, fence.Exhausted(backupsLimit, fmt.Sprintf("at most %d", maxBackups), fmt.Sprint(len(m.slot))))
	}
	hdr, write, err := m.s.deps.Node.Backup(ctx)
	if err != nil {
		return m.error(ctx, err)
	}
	out := &chunkSender{ctx: ctx, stream: stream, hdr: hdr, buf: make([]byte, 0, backupChunk)}
	err = write(out)
	if err == nil {
		err = out.flush()
	}
	if err != nil {
		m.s.log.Warn("backup not sent", "applied_index", hdr.GetAppliedIndex(), "bytes_sent", out.sent, "err", err)
		return m.error(ctx, err)
	}
	m.s.log.Info("backup sent", "applied_index", hdr.GetAppliedIndex(), "last_token", hdr.GetLastToken(), "bytes", out.sent)
	return nil
}

// error maps a backup's error to what the client sees: the node's errors
// as for every call (not the leader, closed: Unavailable; the client's
// context ended: Canceled or DeadlineExceeded); a send that failed because
// the client went away is its own error, passed on.
func (m maintenanceService) error(ctx context.Context, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ctx.Err() != nil {
		return connect.NewError(connect.CodeCanceled, err)
	}
	return m.s.connectError(ctx, fencev1connect.MaintenanceServiceBackupProcedure, err)
}

// chunkSender is the io.Writer a backup is written to: it gathers the bytes
// into messages of backupChunk and sends each when full (flush sends the
// rest). The first message carries the header.
type chunkSender struct {
	ctx    context.Context
	stream *connect.ServerStream[fencev1.BackupResponse]
	hdr    *fencev1.BackupHeader // until the first message is sent
	buf    []byte
	sent   int64 // bytes of data sent
}

func (c *chunkSender) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := copy(c.buf[len(c.buf):cap(c.buf)], p)
		c.buf, p, n = c.buf[:len(c.buf)+k], p[k:], n+k
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush sends what is gathered (and the header if not sent yet).
func (c *chunkSender) flush() error {
	if len(c.buf) == 0 && c.hdr == nil {
		return nil
	}
	// The request's context ends when the client goes away or the server
	// shuts down (Shutdown cancels every request): stop encoding then.
	if err := c.ctx.Err(); err != nil {
		return err
	}
	sendDeadline(c.ctx)
	// Send marshals the message before it returns: buf may be reused.
	err := c.stream.Send(&fencev1.BackupResponse{Data: c.buf, Header: c.hdr})
	if err != nil {
		return err
	}
	c.sent += int64(len(c.buf))
	c.hdr, c.buf = nil, c.buf[:0]
	return nil
}

var _ io.Writer = (*chunkSender)(nil)
