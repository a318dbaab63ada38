package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

// Backup writes a backup file of the state of the node the Client talks to
// into w, as the node streams it (MaintenanceService.Backup), and returns
// what the file's header records. The node copies its state as of one
// applied index (a leader after confirming it leads, a follower after
// catching up to the commit index it knows) and encodes it while it goes on
// serving; the file holds the header, the state and a checksum (package
// backup reads and verifies it; fence restore builds a data dir from it).
//
// A backup is not forwarded: it is the state of the node asked. With
// several endpoints, the next is asked (as for any call: one that cannot
// be reached, answers Unavailable or sends nothing within the attempt
// timeout) only until the first byte was written to w; a stream that breaks
// after that is an error, and what w received must be thrown away (fence
// backup writes FILE.tmp and removes it). Once the stream runs, a node that
// sends nothing for the attempt timeout (WithAttemptTimeout) ends it; a
// slow w only slows the stream (the node waits up to its write timeout for
// each message to be taken). ctx bounds the whole backup.
func (c *Client) Backup(ctx context.Context, w io.Writer) (*fencev1.BackupHeader, error) {
	if w == nil {
		return nil, fence.Invalid("w", "a writer, not nil", "nil")
	}
	var (
		st     *connect.ServerStreamForClient[fencev1.BackupResponse]
		sctx   context.Context
		cancel context.CancelCauseFunc
		from   string
	)
	// Each attempt opens the stream and waits for its first message within
	// the attempt's bounds; the stream itself lives under ctx, so that it
	// outlives the attempt once it started.
	err := c.withRetry(ctx, "backup", 0, func(actx context.Context, ep *endpoint, _ int) error {
		streamCtx, scancel := context.WithCancelCause(ctx)
		stop := context.AfterFunc(actx, func() { scancel(context.Cause(actx)) })
		s, err := fencev1connect.NewMaintenanceServiceClient(c.cfg.httpClient, ep.url, c.cfg.connectOptions()...).
			Backup(streamCtx, connect.NewRequest(&fencev1.BackupRequest{}))
		if err == nil && !s.Receive() {
			if err = s.Err(); err == nil {
				err = fmt.Errorf("%s ended the backup stream before sending anything", ep.url)
			}
		}
		if !stop() && err == nil {
			err = actx.Err() // the attempt ended just as the first message came
		}
		if err != nil {
			if s != nil {
				s.Close()
			}
			scancel(nil)
			return err
		}
		st, sctx, cancel, from = s, streamCtx, scancel, ep.url
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() { st.Close(); cancel(nil) }()
	hdr := st.Msg().GetHeader()
	if hdr == nil {
		return nil, fmt.Errorf("fence: backup: the first message from %s carries no header (a server without backups?)", from)
	}
	var written int64
	write := func(p []byte) error {
		n, err := w.Write(p)
		written += int64(n)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		return err
	}
	if err := write(st.Msg().GetData()); err != nil {
		return nil, fmt.Errorf("fence: backup: writing the backup: %w", err)
	}
	idle := c.cfg.attemptTimeout
	for {
		t := time.AfterFunc(idle, func() { cancel(errBackupStalled) })
		ok := st.Receive()
		t.Stop()
		if !ok {
			break
		}
		if err := write(st.Msg().GetData()); err != nil {
			return nil, fmt.Errorf("fence: backup: writing the backup after %d bytes: %w", written, err)
		}
	}
	if err := st.Err(); err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(sctx), errBackupStalled) {
			err = fmt.Errorf("%w for %s", errBackupStalled, idle)
		}
		return nil, withCause(ctx, fmt.Errorf("fence: backup from %s: the stream broke after %d bytes (discard them): %w", from, written, err))
	}
	return hdr, nil
}

// errBackupStalled: the node sent nothing for the attempt timeout.
var errBackupStalled = errors.New("the node sent nothing")
