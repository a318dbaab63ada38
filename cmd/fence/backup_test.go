//go:build e2e

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/backup"
	"github.com/fenceworks/fence/client"
)

// backupJSON is fence backup --json.
type backupJSON struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	Header struct {
		Format       int    `json:"format"`
		ClusterID    string `json:"clusterId"`
		NodeID       string `json:"nodeId"`
		Role         string `json:"role"`
		AppliedIndex uint64 `json:"appliedIndex"`
		Term         uint64 `json:"term"`
		LastToken    uint64 `json:"lastToken"`
		ServerTime   string `json:"serverTime"`
		WallUnixMS   int64  `json:"wallUnixMs"`
		Version      string `json:"version"`
	} `json:"header"`
}

// backupNodeStatus is the node's own NodeStatus.
func backupNodeStatus(t *testing.T, url string) *fencev1.NodeStatusResponse {
	t.Helper()
	res, err := fencev1connect.NewClusterServiceClient(http.DefaultClient, url).NodeStatus(context.Background(), connect.NewRequest(&fencev1.NodeStatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg
}

// verifyFile checks the backup file at path and returns its header and
// trailer.
func verifyFile(t *testing.T, path string) (backup.Header, backup.Trailer) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, tr, err := backup.Verify(f)
	if err != nil {
		t.Fatalf("%s does not verify: %v", path, err)
	}
	return h, tr
}

// dirNames lists dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// fence backup FILE against a running node: FILE verifies, its header is
// what --json printed and what the node's status says (node id, cluster
// id, counter, applied index), FILE.tmp is gone; without --json the summary
// goes to stdout (to stderr with FILE "-", which writes a file that
// verifies to stdout); a second backup replaces FILE.
func TestProcessBackup(t *testing.T) {
	srv := startServe(t)
	tok := tokenOf(t, fenceRun(t, srv.url, "acquire", "bk", "--ttl", "1m").want(t, exitOK, "acquire").stdout)
	fenceRun(t, srv.url, "write", "bk", "--token", fmt.Sprint(tok), "--value", "v1").want(t, exitOK, "write")

	dir := t.TempDir()
	file := filepath.Join(dir, "fence.backup")
	r := fenceRun(t, srv.url, "backup", file, "--json").want(t, exitOK, "fence backup FILE --json")
	var out backupJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("fence backup --json printed %q: %v", r.stdout, err)
	}
	if names := dirNames(t, dir); len(names) != 1 || names[0] != "fence.backup" {
		t.Fatalf("the backup's directory holds %q, want only fence.backup", names)
	}
	h, tr := verifyFile(t, file)
	st := backupNodeStatus(t, srv.url)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case out.File != file || out.Bytes != fi.Size() || out.SHA256 != tr.SHA256:
		t.Fatalf("--json says file %s, %d bytes, sha256 %s; the file has %d bytes, trailer %+v", out.File, out.Bytes, out.SHA256, fi.Size(), tr)
	case out.Header.NodeID != h.NodeID || out.Header.ClusterID != h.ClusterID || out.Header.AppliedIndex != h.AppliedIndex ||
		out.Header.LastToken != uint64(h.LastToken) || out.Header.Term != h.Term || out.Header.WallUnixMS != h.WallUnixMS || out.Header.Format != h.Format:
		t.Fatalf("--json header %+v, file header %+v", out.Header, h)
	case h.NodeID != st.GetId() || h.ClusterID == "" || h.ClusterID != st.GetClusterId() || uint64(h.LastToken) != st.GetLastToken() || uint64(h.LastToken) != tok ||
		h.AppliedIndex == 0 || h.AppliedIndex > st.GetAppliedIndex() || h.Term != st.GetTerm():
		t.Fatalf("file header %+v, node status %v (granted token %d)", h, st, tok)
	}

	// The summary is on stdout, as fence restore's; stderr stays empty.
	r = fenceRun(t, srv.url, "backup", file).want(t, exitOK, "fence backup FILE again")
	if r.stderr != "" || !strings.HasPrefix(r.stdout, "backup written to "+file) || !strings.Contains(r.stdout, fmt.Sprintf("last token %d", tok)) {
		t.Fatalf("fence backup FILE: stdout %q, stderr %q; want the summary on stdout", r.stdout, r.stderr)
	}
	if _, tr2 := verifyFile(t, file); !strings.Contains(r.stdout, tr2.SHA256) {
		t.Fatalf("the summary %q lacks the new file's sha256 %s", r.stdout, tr2.SHA256)
	}

	r = fenceRun(t, srv.url, "backup", "-").want(t, exitOK, "fence backup -")
	sh, _, err := backup.Verify(strings.NewReader(r.stdout))
	if err != nil || sh.NodeID != h.NodeID || sh.LastToken != h.LastToken {
		t.Fatalf("fence backup - wrote %d bytes: header %+v, %v", len(r.stdout), sh, err)
	}
	if !strings.Contains(r.stderr, "backup written to stdout") {
		t.Fatalf("fence backup -: stderr %q", r.stderr)
	}

	fenceRun(t, srv.url, "backup").want(t, exitUsage, "fence backup without FILE")
	fenceRun(t, srv.url, "backup", "a", "b").want(t, exitUsage, "fence backup a b")
}

// cutProxy passes connections to upstream; of what upstream sends it
// passes the first limit bytes of each connection, then (hold false)
// closes both ends, or (hold true) passes nothing more and keeps both open
// until the test ends.
func cutProxy(t *testing.T, upstream string, limit int64, hold bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go io.Copy(up, c)
			go func() {
				io.CopyN(c, up, limit)
				if !hold {
					c.Close()
					up.Close()
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A backup stream that breaks after some bytes (the connection cut), or
// stalls (the node sends nothing more for --timeout), fails fence backup:
// exit 1, FILE.tmp removed, FILE as it was (absent, or an older backup
// left untouched).
func TestProcessBackupStreamFails(t *testing.T) {
	srv := startServe(t)
	c, err := client.New(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i := range 8 { // 8 × 128 KiB: a backup well over the proxy's 256 KiB
		l, err := c.Acquire(ctx, fmt.Sprintf("big-%d", i), client.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		v := make([]byte, 128<<10)
		rand.Read(v)
		if _, err := c.Write(ctx, fmt.Sprintf("big-%d", i), l.Token(), v); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole")
	fenceRun(t, srv.url, "backup", whole).want(t, exitOK, "fence backup (direct)")
	if _, tr := verifyFile(t, whole); tr.StateBytes < 1<<20 {
		t.Fatalf("state of %d bytes: want over 1 MiB", tr.StateBytes)
	}

	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("an older backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		hold bool
		file string
		want string
	}{
		{"cut", false, filepath.Join(dir, "cut"), "broke after"},
		{"cut over an older backup", false, old, "broke after"},
		{"stalled", true, filepath.Join(dir, "stalled"), "sent nothing"},
	} {
		url := cutProxy(t, strings.TrimPrefix(srv.url, "http://"), 256<<10, tc.hold)
		r := fenceRun(t, url, "backup", tc.file, "--timeout", "2s").want(t, exitError, "fence backup, "+tc.name)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: stderr %q, want %q", tc.name, r.stderr, tc.want)
		}
		if left, _ := filepath.Glob(tc.file + ".tmp*"); len(left) > 0 {
			t.Errorf("%s: temporary files left behind: %q", tc.name, left)
		}
		if tc.file == old {
			if b, err := os.ReadFile(old); err != nil || !bytes.Equal(b, []byte("an older backup")) {
				t.Errorf("%s: the older backup became %d bytes (%v)", tc.name, len(b), err)
			}
		} else if _, err := os.Stat(tc.file); !os.IsNotExist(err) {
			t.Errorf("%s: %s exists after a failed backup (%v)", tc.name, tc.file, err)
		}
	}
	if names := dirNames(t, dir); strings.Join(names, ",") != "old,whole" {
		t.Fatalf("the directory holds %q after the failures", names)
	}
}

// A symlink planted at FILE.tmp (and at FILE.tmp-looking names) is not
// followed: its target keeps its bytes, FILE becomes a regular file of
// mode 0600 holding the backup, and the planted link is left as it was.
func TestProcessBackupIgnoresPlantedTemp(t *testing.T) {
	srv := startServe(t)
	fenceRun(t, srv.url, "acquire", "pl", "--ttl", "1m").want(t, exitOK, "acquire")
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "out.backup")
	if err := os.Symlink(victim, file+".tmp"); err != nil {
		t.Fatal(err)
	}
	fenceRun(t, srv.url, "backup", file).want(t, exitOK, "fence backup with a symlink at FILE.tmp")
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Fatalf("the symlink's target became %q (%v): the backup followed FILE.tmp", b, err)
	}
	fi, err := os.Lstat(file)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s is %s, want a regular file of mode 0600", file, fi.Mode())
	}
	verifyFile(t, file)
	if l, err := os.Readlink(file + ".tmp"); err != nil || l != victim {
		t.Fatalf("the planted link became %q (%v)", l, err)
	}
	if names := dirNames(t, dir); strings.Join(names, ",") != "out.backup,out.backup.tmp,victim" {
		t.Fatalf("the directory holds %q", names)
	}
}

// F8: a cluster node that knows no leader (its two peers never start)
// answers the backup Unavailable, which the client retries; --timeout
// bounds the whole wait for the first byte across those retries: fence
// backup exits 1 naming the node's answer and the timeout, leaves no file
// (FILE and "-" alike; 5 s: the node must have answered at least once by
// then on a loaded machine). Without the bound it retried until the process
// limit killed it.
func TestProcessBackupTimeoutWithoutLeader(t *testing.T) {
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	ra, b, c := free(), free(), free()
	srv := startServe(t, "--node-id", "a", "--raft-addr", ra, "--peers", "a="+ra+",b="+b+",c="+c)
	dir := t.TempDir()
	file := filepath.Join(dir, "nl.backup")
	r := fenceRun(t, srv.url, "backup", file, "--timeout", "5s").want(t, exitError, "fence backup from a node without a leader")
	if !strings.Contains(r.stderr, "leader") || !strings.Contains(r.stderr, "within --timeout 5s") {
		t.Errorf("stderr %q: want the node's answer (no leader) and the timeout", r.stderr)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("the directory holds %q after the refused backup", names)
	}
	r = fenceRun(t, srv.url, "backup", "-", "--timeout", "5s").want(t, exitError, "fence backup - from a node without a leader")
	if r.stdout != "" || !strings.Contains(r.stderr, "within --timeout 5s") {
		t.Errorf("fence backup -: stdout %d bytes, stderr %q", len(r.stdout), r.stderr)
	}
}
