//go:build e2e

package main

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// serveLog starts `fence serve` on dataDir, waits for it to serve and
// returns its URL and the log lines printed before; it is stopped at
// cleanup. The test process's umask is 022, as a shell's usually is.
func serveLog(t *testing.T, dataDir string) (url string, before []string) {
	t.Helper()
	cmd := exec.Command(fenceBin, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := servingRe.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
		before = append(before, sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		waitExited(t, exited, "fence serve")
	})
	if url == "" {
		t.Fatalf("fence serve exited before serving; its log:\n%s", strings.Join(before, "\n"))
	}
	return url, before
}

// TestProcessServeDataDirIsPrivate: a fresh `fence serve` creates its data
// dir 0700 and nothing in it (WAL segments, snapshots, metadata: the
// signing key seeds and auth state) readable by its group or others, with
// the shell's usual umask 022; it warns about no dir. An existing data dir
// of mode 0755 is used as it is, with a warning saying what to chmod.
func TestProcessServeDataDirIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "fresh", "data")
	url, log := serveLog(t, dir)
	for _, l := range log {
		if strings.Contains(l, "chmod 700") {
			t.Fatalf("a fresh data dir warned: %s", l)
		}
	}
	fenceRun(t, url, "acquire", "sku-1", "--ttl", "30s").want(t, 0, "acquire") // a write to the WAL
	wantPrivate(t, dir)
	// A data dir `fence restore` makes is private too.
	file := filepath.Join(t.TempDir(), "b.fence")
	fenceRun(t, url, "backup", file).want(t, 0, "backup")
	restored := filepath.Join(t.TempDir(), "restored", "data")
	fenceRun(t, "", "restore", file, "--data-dir", restored).want(t, 0, "restore")
	wantPrivate(t, restored)

	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	_, log = serveLog(t, shared)
	warned := false
	for _, l := range log {
		warned = warned || strings.Contains(l, "WARN") && strings.Contains(l, "0755") && strings.Contains(l, "chmod 700 "+shared)
	}
	if !warned {
		t.Fatalf("a 0755 data dir: no warning naming its mode and chmod 700 %s in the log:\n%s", shared, strings.Join(log, "\n"))
	}
}

// wantPrivate checks that dir is 0700 and nothing in it is accessible to
// its group or others.
func wantPrivate(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Fatalf("data dir %s mode %#o, want 0700", dir, perm)
	}
	n := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %#o, want no access for group and others", path, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 {
		t.Fatalf("walked %d entries in %s: want the WAL and its files", n, dir)
	}
}
