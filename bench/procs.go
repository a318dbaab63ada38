package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenceworks/fence/testkit/harness"
)

// Server is one server process the runner started: its pid (for /proc), the
// address its clients use, and how to stop it. A fence server is run by
// testkit/harness (fence); the others by startProc here.
type Server struct {
	Kind  string // "fence", "etcd", "redis-always", "redis-everysec"
	Addr  string // host:port for clients
	fence *harness.Server
	cmd   *exec.Cmd
	dir   string
	log   *os.File
	done  chan struct{}
}

// Pid is the server's process id.
func (s *Server) Pid() int {
	if s.fence != nil {
		return s.fence.Pid()
	}
	return s.cmd.Process.Pid
}

// Stop ends the server (SIGTERM, then SIGKILL after 10s) and removes its
// data dir.
func (s *Server) Stop() {
	if s != nil && s.fence != nil {
		_ = s.fence.Stop() // its StopTimeout is 10s, then SIGKILL
		_ = s.fence.Close()
		_ = os.RemoveAll(s.dir)
		return
	}
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.log.Close()
	_ = os.RemoveAll(s.dir)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	addr, err := harness.FreeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	return strconv.Atoi(port)
}

// startProc starts a server process with its output in dir/server.log.
func startProc(kind, dir string, name string, args ...string) (*Server, error) {
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", kind, err)
	}
	s := &Server{Kind: kind, cmd: cmd, dir: dir, log: logf, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	return s, nil
}

// waitFor polls ok until it reports true, the process exits, or 60s pass.
func (s *Server) waitFor(ok func() bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it was ready; log: %s", s.Kind, tail(filepath.Join(s.dir, "server.log")))
		default:
		}
		if ok() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	return fmt.Errorf("%s not ready after 60s", s.Kind)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// StartFence runs `fence serve` from bin on a free loopback port with a
// fresh data dir under tmp (testkit/harness starts it and waits for
// /readyz). The rules are opened up so that the held-leases and
// expiry-storm workloads fit (no cap on locks and waiters, room for the
// request ids of a million acquires).
func StartFence(bin, tmp string) (*Server, error) {
	return startFence(bin, tmp, "fence", nil)
}

// startFence starts a fence server of kind with more serve flags; tlsCfg
// is the client TLS configuration of a server that serves TLS.
func startFence(bin, tmp, kind string, tlsCfg *tls.Config, more ...string) (*Server, error) {
	dir, err := os.MkdirTemp(tmp, "fence-")
	if err != nil {
		return nil, err
	}
	hs, err := harness.Start(context.Background(), harness.Config{
		Bin:     bin,
		ID:      kind,
		DataDir: filepath.Join(dir, "data"),
		Args: append([]string{"--max-locks", "0", "--max-waiters", "0", "--max-waiters-per-lock", "0",
			"--max-ids", "4000000", "--min-id-retention", "1s", "--max-conns", "16384"}, more...),
		ClientTLS:    tlsCfg,
		LogPath:      filepath.Join(dir, "server.log"),
		LogLimit:     64 << 10,
		ReadyTimeout: 60 * time.Second,
		StopTimeout:  10 * time.Second,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return &Server{Kind: kind, Addr: hs.Addr(), fence: hs, dir: dir}, nil
}

// StartEtcd runs the etcdserver binary (bench/cmd/etcdserver) on free
// loopback ports with a fresh data dir under tmp.
func StartEtcd(bin, tmp string) (*Server, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tmp, "etcd-")
	if err != nil {
		return nil, err
	}
	s, err := startProc("etcd", dir, bin, "--client-port", strconv.Itoa(cport), "--peer-port", strconv.Itoa(pport),
		"--data-dir", filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	s.Addr = fmt.Sprintf("127.0.0.1:%d", cport)
	logPath := filepath.Join(dir, "server.log")
	return s, s.waitFor(func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "ready\n")
	})
}

// StartRedis runs redis-server with an append-only file fsync'd per
// fsyncPolicy ("always" or "everysec"), no RDB snapshots, on a free loopback
// port with its dir under tmp.
func StartRedis(bin, fsyncPolicy, tmp string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tmp, "redis-")
	if err != nil {
		return nil, err
	}
	s, err := startProc("redis-"+fsyncPolicy, dir, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", fsyncPolicy, "--save", "",
		"--maxclients", "16000", "--daemonize", "no")
	if err != nil {
		return nil, err
	}
	s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	return s, s.waitFor(func() bool {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			return false
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		return err == nil && strings.HasPrefix(line, "+PONG")
	})
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux the runner targets).
const clockTicks = 100

// CPUSeconds returns the user + system CPU time the process has used, from
// /proc/PID/stat.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat times")
	}
	return (ut + st) / clockTicks, nil
}

// RSS returns the resident set size (VmRSS) and its peak (VmHWM) of a
// process in bytes, from /proc/PID/status.
func RSS(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		if k == "VmRSS" {
			rss = n << 10
		} else {
			peak = n << 10
		}
	}
	return rss, peak, nil
}

// buildFence builds ../cmd/fence (the main module, so the fence binary is
// built exactly as `make build` builds it) into dir.
func buildGo(ctx context.Context, moduleDir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}
