//go:build e2e

package system_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size at dir, unmounted at the end of the
// test. Where mounting is not permitted the test is skipped, except under
// CI, where it fails.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("mount -t tmpfs at %s: %v: %s", dir, err, out)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (not permitted here; CI runs it)")
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

func resizeTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s with size %s: %v: %s", dir, size, err, out)
	}
}

// diskValue is write seq of a disk-full client: its number, then padding.
func diskValue(seq int, size int) string {
	head := fmt.Sprintf("seq=%09d;", seq)
	return head + strings.Repeat("x", size-len(head))
}

func diskSeq(value []byte) int {
	head, _, _ := bytes.Cut(value, []byte(";"))
	n, _ := strconv.Atoi(strings.TrimPrefix(string(head), "seq="))
	return n
}

// Fault 5 end to end: the data dir is on a small filesystem that fills up
// under load. The server must stop (exit non-zero: fail-stop), not go on
// refusing or misreporting; after the filesystem is enlarged and the server
// restarted, every acknowledged write is there and no token is granted
// twice.
func TestNodeDiskFull(t *testing.T) {
	t.Parallel() // own processes, ports and dirs: safe beside the other parallel tests (docs/testing.md)
	// The WAL preallocates 64 MiB segments: in 80 MiB the first fits, its
	// successor does not, and after the restart more than a segment's
	// worth is written (300 × 256 KiB).
	// The restart replays ~600 entries of 256 KiB under -race: 7-11 s on a
	// loaded 2-core box, near the default --ready-timeout of 10 s. This test
	// is about what survives a full disk, not how fast a restart is.
	t.Run("wal", func(t *testing.T) { diskFull(t, "80m", 300, "--ready-timeout", "60s") })
}

// diskFull fills a tmpfs of size under load, and after the restart writes
// after values more.
func diskFull(t *testing.T, size string, after int, serveArgs ...string) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountTmpfs(t, mnt, size)
	srv := startServerIn(t, filepath.Join(mnt, "data"), serveArgs...)
	c := connectAPI(srv)

	const clients, valueSize = 4, 256 << 10
	type clientState struct {
		ackedSeq   int    // last acknowledged write
		ackedToken uint64 // its token
		tokens     []uint64
	}
	var mu sync.Mutex
	states := make([]clientState, clients)
	var acks int
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			lock, res := fmt.Sprintf("disk/lock-%d", i), fmt.Sprintf("disk/res-%d", i)
			for seq := 1; ; seq++ {
				l, err := c.acquire(ctx, lock, "disk", time.Hour, 0)
				if err != nil {
					return // the server stopped
				}
				mu.Lock()
				states[i].tokens = append(states[i].tokens, l.GetToken())
				mu.Unlock()
				if _, err := c.write(ctx, res, l.GetToken(), diskValue(seq, valueSize)); err != nil {
					return
				}
				mu.Lock()
				states[i].ackedSeq, states[i].ackedToken = seq, l.GetToken()
				acks++
				mu.Unlock()
				if err := c.release(ctx, lock, l.GetToken()); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	srv.wait() // the server exits on its own: fail-stop
	if srv.ExitState().Success() {
		t.Fatalf("fence serve exited with %v after the disk filled, want a non-zero status", srv.ExitState())
	}
	if !strings.Contains(srv.Log(), "fatal storage error") {
		t.Errorf("the server's log does not name the fatal storage error")
	}
	t.Logf("%d writes acknowledged before the disk filled; server exit: %v", acks, srv.ExitState())
	if acks == 0 {
		t.Fatal("nothing was acknowledged before the disk filled")
	}

	resizeTmpfs(t, mnt, "400m")
	srv.Restart()
	ctx := context.Background()
	var maxToken uint64
	for i, st := range states {
		for _, tok := range st.tokens {
			maxToken = max(maxToken, tok)
		}
		rs, err := c.read(ctx, fmt.Sprintf("disk/res-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got := diskSeq(rs.GetValue()); got < st.ackedSeq || rs.GetLastToken() < st.ackedToken {
			t.Errorf("disk/res-%d after restart: write %d (token %d); acknowledged write %d (token %d) is lost",
				i, got, rs.GetLastToken(), st.ackedSeq, st.ackedToken)
		}
	}
	// No token repeats: every grant after the restart is above every token
	// any client was given. And the server takes writes again, more than a
	// WAL segment's worth (its next segment is the one that did not fit).
	for i := 0; i < after; i++ {
		l, err := c.acquire(ctx, "disk/after", "after", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if l.GetToken() <= maxToken {
			t.Fatalf("grant after restart has token %d, not above %d given before the disk filled", l.GetToken(), maxToken)
		}
		maxToken = l.GetToken()
		if _, err := c.write(ctx, "disk/res-0", l.GetToken(), diskValue(1<<20+i, valueSize)); err != nil {
			t.Fatalf("write after restart: %v", err)
		}
		if err := c.release(ctx, "disk/after", l.GetToken()); err != nil {
			t.Fatal(err)
		}
	}
}
