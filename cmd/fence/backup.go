package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/backup"
	"github.com/fenceworks/fence/client"
)

const backupUsage = `FILE

Writes a backup of the state of the node --server names (the first that
answers, with several) to FILE: the node copies its state as of one applied
index — a leader after confirming it leads, a follower after catching up to
the commit index it knows — and streams it while it goes on serving. The
file holds a header (cluster and node id, applied index, token counter,
server and wall-clock time, version), the state and a SHA-256 checksum;
fence restore builds a data dir from it.

The backup goes to a new file FILE.tmp-RANDOM in FILE's directory (created
mode 0600; an existing file is never opened), is synced, checked
(checksum) and then renamed to FILE, replacing a regular file that exists
(FILE that is a device, pipe, socket, directory or symbolic link is refused,
exit 2: the rename would replace it; use "-" and redirect); if anything
fails the temporary file is removed and FILE is left as it was. FILE "-" writes to
stdout (checked as it is written; the exit status says whether it is whole).

The summary (the header's facts; with --json one object) is printed on
stdout, as fence restore's — on stderr when FILE is "-", since stdout then
carries the backup itself. --timeout bounds the whole wait for
a node to start sending (every retry and endpoint included: a node that
knows no leader is asked again until then) and any pause in the stream,
not the whole backup (0: no limit).
`

// backupCmd is `fence backup FILE`.
func backupCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("backup", backupUsage, g, stderr)
	pos, err := parseExact(fs, args, "FILE")
	if err != nil {
		return usageExit(err)
	}
	path := pos[0]
	out := stdout // where the summary and errors (--json) go
	if path == "-" {
		out = stderr
	}
	if path == "" {
		return fail(g, out, stderr, &usageError{"backup: FILE is empty (want a path, or - for stdout)"})
	}
	if err := checkBackupTarget(path); err != nil {
		return fail(g, out, stderr, err)
	}
	idle := g.timeout
	if idle <= 0 {
		idle = math.MaxInt64 // --timeout 0: no limit, as for every command
	}
	opts := []client.Option{client.WithFailFast(), client.WithoutSession(), client.WithAttemptTimeout(idle)}
	c, err := client.New(g.server, g.clientOptions(opts...)...)
	if err != nil {
		return fail(g, out, stderr, &usageError{err.Error()})
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// --timeout bounds the whole wait for the first byte, across the
	// client's retries and failover (a node that knows no leader answers
	// Unavailable, which is retried): the attempt timeout alone bounds each
	// attempt, not their number.
	ctx, first := firstByteWithin(ctx, g.timeout)
	defer first.stop()

	var res backupResult
	if path == "-" {
		res, err = backupToStdout(ctx, c, stdout, first)
	} else {
		res, err = backupToFile(ctx, c, path, first)
	}
	if err != nil {
		return fail(g, out, stderr, err)
	}
	emit(g, out, res.human(), res.json())
	return exitOK
}

// backupResult is what fence backup reports.
type backupResult struct {
	path   string
	hdr    *fencev1.BackupHeader
	bytes  int64  // of the file
	sha256 string // the trailer's (of every byte before it)
}

func (r backupResult) human() string {
	h := r.hdr
	cluster := h.GetClusterId()
	if cluster == "" {
		cluster = "(none recorded)"
	}
	to := r.path
	if to == "-" {
		to = "stdout"
	}
	return fmt.Sprintf("backup written to %s: %d bytes, sha256 %s\n"+
		"  node %s (%s), cluster %s\n"+
		"  applied index %d, term %d, last token %d\n"+
		"  server time %s, wall clock %s, fence %s",
		to, r.bytes, r.sha256,
		h.GetNodeId(), h.GetRole(), cluster,
		h.GetAppliedIndex(), h.GetTerm(), h.GetLastToken(),
		h.GetServerTime().AsDuration(), time.UnixMilli(h.GetWallUnixMs()).UTC().Format(time.RFC3339Nano), h.GetVersion()) + r.roleNote()
}

// roleNote is said under a backup a node took while not the leader.
func (r backupResult) roleNote() string {
	if strings.EqualFold(r.hdr.GetRole(), "leader") {
		return ""
	}
	return "\n  note: " + r.hdr.GetNodeId() + " was not the leader: the backup holds what it had applied (up to the commit\n" +
		"  index it knew), which may miss the latest writes; back up through the leader for the latest state"
}

// json is the --json object: the header with the API's field names.
func (r backupResult) json() map[string]any {
	h := r.hdr
	return map[string]any{
		"file": r.path, "bytes": r.bytes, "sha256": r.sha256,
		"header": map[string]any{
			"format": h.GetFormat(), "clusterId": h.GetClusterId(), "nodeId": h.GetNodeId(), "role": h.GetRole(),
			"appliedIndex": h.GetAppliedIndex(), "term": h.GetTerm(), "lastToken": h.GetLastToken(),
			"serverTime": jsonDuration(h.GetServerTime().AsDuration()), "wallUnixMs": h.GetWallUnixMs(), "version": h.GetVersion(),
		},
	}
}

// firstByteTimer ends a backup's context when no byte of the backup came
// within the timeout (across every attempt); the first byte stops it.
type firstByteTimer struct {
	d time.Duration
	t *time.Timer // nil: no limit
}

// errNoFirstByte is the cause of a backup's context that ended because the
// node did not start sending within --timeout.
type errNoFirstByte struct{ d time.Duration }

func (e errNoFirstByte) Error() string {
	return fmt.Sprintf("gave up: no node started sending the backup within --timeout %s", e.d)
}
func (e errNoFirstByte) Unwrap() error { return context.DeadlineExceeded }

// firstByteWithin returns ctx ended (cause errNoFirstByte) after d unless
// the timer's started is called before; d <= 0: no limit.
func firstByteWithin(ctx context.Context, d time.Duration) (context.Context, *firstByteTimer) {
	if d <= 0 {
		return ctx, &firstByteTimer{}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	f := &firstByteTimer{d: d}
	f.t = time.AfterFunc(d, func() { cancel(errNoFirstByte{d}) })
	context.AfterFunc(ctx, func() { f.t.Stop() })
	return ctx, f
}

// started stops the timer as the first byte comes; it fails if the timer
// already ended the backup.
func (f *firstByteTimer) started() error {
	if f.t == nil || f.t.Stop() {
		return nil
	}
	return errNoFirstByte{f.d}
}

func (f *firstByteTimer) stop() {
	if f.t != nil {
		f.t.Stop()
	}
}

// backupCounter counts the bytes written through it; the first write
// stops first's timer.
type backupCounter struct {
	w     io.Writer
	n     int64
	first *firstByteTimer
}

func (c *backupCounter) Write(p []byte) (int, error) {
	if c.first != nil {
		f := c.first
		c.first = nil
		if err := f.started(); err != nil {
			return 0, err
		}
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkBackupTarget refuses a FILE that exists and is not a regular file.
// The backup is renamed over FILE, which replaces whatever is there: a
// device (as root, fence backup /dev/null or /dev/full would leave a
// regular file in its place for everyone), a pipe, a socket, or a symbolic
// link (/dev/stdout is one) — never what the user meant.
func checkBackupTarget(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil // a new file (or a directory fence backup cannot read: reported when it writes)
	}
	var what string
	switch m := fi.Mode(); {
	case m.IsRegular():
		return nil
	case m&os.ModeSymlink != 0:
		what = "a symbolic link"
	case m&os.ModeDevice != 0:
		what = "a device"
	case m&os.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&os.ModeSocket != 0:
		what = "a socket"
	case m.IsDir():
		what = "a directory"
	default:
		what = "not a regular file"
	}
	return &usageError{fmt.Sprintf("backup: FILE %s is %s: fence backup writes a new file and renames it over FILE, which would replace it; "+
		"give a regular file's path, or write to stdout and redirect it (fence backup - > %s)", path, what, path)}
}

// backupToFile writes the backup to a new temporary file path.tmp-RANDOM,
// syncs it, checks it, renames it to path and syncs the directory. On an
// error the temporary file is removed and path is untouched.
func backupToFile(ctx context.Context, c *client.Client, path string, first *firstByteTimer) (res backupResult, err error) {
	// A new file of a random name (O_CREATE|O_EXCL, mode 0600) in path's
	// directory: a fixed name could be a symlink or file someone planted,
	// which the backup would follow and overwrite.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return res, fmt.Errorf("backup: create a temporary file beside %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	cw := &backupCounter{w: f, first: first}
	hdr, err := c.Backup(ctx, cw)
	if err != nil {
		return res, err
	}
	if err = f.Sync(); err != nil {
		return res, fmt.Errorf("backup: sync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return res, fmt.Errorf("backup: close %s: %w", tmp, err)
	}
	sum, err := checkBackupFile(tmp, hdr)
	if err != nil {
		return res, err
	}
	if err = os.Rename(tmp, path); err != nil {
		return res, err
	}
	if err = syncBackupDir(filepath.Dir(path)); err != nil {
		return res, fmt.Errorf("backup: written to %s, but syncing its directory failed: %w", path, err)
	}
	return backupResult{path: path, hdr: hdr, bytes: cw.n, sha256: sum}, nil
}

// backupToStdout writes the backup to stdout, checking it as it goes (a
// reader of the file beside the writer): a stream that ends short or
// differs from its checksum fails the command, though stdout got it.
func backupToStdout(ctx context.Context, c *client.Client, stdout io.Writer, first *firstByteTimer) (backupResult, error) {
	cw := &backupCounter{w: stdout, first: first}
	pr, pw := io.Pipe()
	type verified struct {
		h   backup.Header
		t   backup.Trailer
		err error
	}
	check := make(chan verified, 1)
	go func() {
		h, t, err := backup.Verify(pr)
		pr.CloseWithError(errCheckEnded)
		check <- verified{h, t, err}
	}()
	hdr, err := c.Backup(ctx, io.MultiWriter(cw, pw))
	pw.CloseWithError(err) // nil: EOF
	v := <-check
	if err != nil && !errors.Is(err, errCheckEnded) {
		return backupResult{}, err
	}
	if v.err == nil {
		v.err = sameHeader(v.h, hdr)
	}
	if v.err != nil {
		return backupResult{}, fmt.Errorf("backup: written to stdout, but it does not check: %w", v.err)
	}
	return backupResult{path: "-", hdr: hdr, bytes: cw.n, sha256: v.t.SHA256}, nil
}

// errCheckEnded: the check of a backup written to stdout stopped reading
// (it found the stream wrong).
var errCheckEnded = errors.New("the check of the backup ended early")

// checkBackupFile reads the backup at path, checks it (backup.Verify: the
// framing and the checksum) and that its header is the one the node
// streamed; it returns the trailer's SHA-256.
func checkBackupFile(path string, hdr *fencev1.BackupHeader) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h, t, err := backup.Verify(f)
	if err == nil {
		err = sameHeader(h, hdr)
	}
	if err != nil {
		return "", fmt.Errorf("backup: %s does not check: %w", path, err)
	}
	return t.SHA256, nil
}

// sameHeader checks the file's header against the facts the node streamed.
func sameHeader(h backup.Header, hdr *fencev1.BackupHeader) error {
	if h.NodeID != hdr.GetNodeId() || h.ClusterID != hdr.GetClusterId() || h.AppliedIndex != hdr.GetAppliedIndex() ||
		h.Term != hdr.GetTerm() || uint64(h.LastToken) != hdr.GetLastToken() || h.WallUnixMS != hdr.GetWallUnixMs() {
		return fmt.Errorf("the file's header (node %s, cluster %q, applied index %d, term %d, last token %d) is not the one the node sent (node %s, cluster %q, applied index %d, term %d, last token %d)",
			h.NodeID, h.ClusterID, h.AppliedIndex, h.Term, h.LastToken,
			hdr.GetNodeId(), hdr.GetClusterId(), hdr.GetAppliedIndex(), hdr.GetTerm(), hdr.GetLastToken())
	}
	return nil
}

// syncBackupDir fsyncs directory dir, so that a rename in it is durable.
func syncBackupDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
