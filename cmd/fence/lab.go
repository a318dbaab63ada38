package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
	"github.com/fenceworks/fence/server"
)

// labCmd plays the seed's scenario (shared/seed/000_f53b156223fbe359.txt)
// against a real server, twice — with a naive store that accepts every
// write, and with the fenced store — and prints the seed's timeline and
// comparison tables with what it observed. It exits 0 only if every row
// came out as the seed says.
//
// It plays against the server of --server or FENCE_SERVER when either is
// given (lock and resource names get a random suffix, so a used server is
// fine); otherwise, or with --embedded, against a server it starts in a
// temporary directory on a free loopback port.
func labCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lab", "[--server URL] [--unit D] [--embedded]", g, stderr)
	unit := duration(fs, "unit", 200*time.Millisecond, "real time of one seed second")
	embedded := fs.Bool("embedded", false, "play against a temporary embedded server even when --server or FENCE_SERVER is set")
	if _, err := parseExact(fs, args); err != nil {
		return usageExit(err)
	}
	if *unit < 2*fence.MinTTL {
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("lab: --unit must be at least %s", 2*fence.MinTTL)})
	}
	g.noteServerFlag(fs)
	endpoint, where := g.server, "given"
	if *embedded && wasSet(fs, "server") {
		return fail(g, stdout, stderr, &usageError{"lab: give --server or --embedded, not both"})
	}
	if !g.serverSet || *embedded {
		url, stop, err := startLabServer()
		if err != nil {
			return fail(g, stdout, stderr, fmt.Errorf("lab: embedded server: %w", err))
		}
		defer stop()
		endpoint, where = url, "embedded, temporary"
	}
	ctx, cancel := g.context(20 * *unit)
	defer cancel()

	id := strings.ToLower(rand.Text()[:8])
	var runs [2]labRun
	for i, mode := range []string{"naive", "fenced"} {
		a, err := client.New(endpoint)
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		b, _ := client.New(endpoint)
		var store labStore = &naiveStore{}
		if mode == "fenced" {
			store = &fencedStore{c: b, resource: "lab-" + id + "/fenced/stock/sku-42"}
		}
		runs[i] = playSeed(ctx, a, b, "lab-"+id+"/"+mode+"/sku-42", store, *unit)
		a.Close()
		b.Close()
		if runs[i].err != nil {
			return fail(g, stdout, stderr, fmt.Errorf("lab (%s): %w", mode, runs[i].err))
		}
	}
	checks := append(runs[0].checkNaive(), runs[1].checkFenced()...)
	ok := true
	for _, c := range checks {
		ok = ok && c.ok
	}
	if g.json {
		emit(g, stdout, "", labJSON(endpoint, *unit, runs, checks, ok))
	} else {
		printLab(stdout, endpoint, where, *unit, runs, checks, ok)
	}
	if !ok {
		return exitError
	}
	return exitOK
}

// startLabServer starts a server in a temporary directory on a free
// loopback port and returns its URL and a function that stops it and
// removes the directory.
func startLabServer() (string, func(), error) {
	dir, err := os.MkdirTemp("", "fence-lab-")
	if err != nil {
		return "", nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(server.Config{DataDir: dir, Logger: quiet})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-served
		os.RemoveAll(dir)
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// seconds renders a real duration in seed seconds.
func seconds(d, unit time.Duration) string {
	return fmt.Sprintf("t=%.2f", float64(d)/float64(unit))
}

func outcome(s string, err error) string {
	var busy *fence.BusyError
	if errors.As(err, &busy) {
		return fmt.Sprintf("BUSY: held by %q (token %d)", busy.Holder, busy.Token)
	}
	if err != nil {
		if r := fence.ReasonOf(err); r != "" {
			return fmt.Sprintf("%s: %v", r, err)
		}
		return "error: " + err.Error()
	}
	return s
}

func printLab(w io.Writer, endpoint, where string, unit time.Duration, runs [2]labRun, checks []labCheck, ok bool) {
	n, f := runs[0], runs[1]
	fmt.Fprintf(w, "fence lab: the seed's scenario, 1 seed second = %s, server %s (%s)\n", unit, endpoint, where)
	fmt.Fprintf(w, "run 1 without fencing: a naive store that accepts every write; run 2 with fencing: the server's fenced store\n\n")
	lost := func(r labRun) string {
		if r.aLostAt == 0 {
			return "A's client still believed it held the lease"
		}
		return fmt.Sprintf("A's client reported the lease lost at %s; A's code keeps running", seconds(r.aLostAt, unit))
	}
	fmt.Fprintln(w, "Moment | Event | Expected result | Observed without fencing | Observed with fencing |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	fmt.Fprintf(w, "t=0 | A receives the lease and token %d | A can start working | A token %d | A token %d |\n", f.tokenA, n.tokenA, f.tokenA)
	fmt.Fprintf(w, "t=4 | B requests a leased resource | LockBusy rejection | %s | %s |\n", outcome("granted", n.busyAt4), outcome("granted", f.busyAt4))
	fmt.Fprintf(w, "t=5 | A's lease expires | Code A does not stop on its own | %s | %s |\n", lost(n), lost(f))
	fmt.Fprintf(w, "t=6 | B receives token %d and writes the remaining product quantity 8 | New state accepted | B token %d, %s | B token %d, %s |\n",
		f.tokenB, n.tokenB, outcome(n.bWrite8, n.bWrite8Err), f.tokenB, outcome(f.bWrite8, f.bWrite8Err))
	fmt.Fprintf(w, "t=7 | A resumes and attempts to write 5 | Write with token %d rejected | %s | %s |\n",
		f.tokenA, outcome(n.aWrite5, n.aWrite5Err), outcome(f.aWrite5, f.aWrite5Err))
	fmt.Fprintln(w)

	yes := func(err error, s string) string {
		if err != nil {
			return outcome("", err)
		}
		return s
	}
	aFenced := "Late write 5 accepted"
	var stale *fence.StaleTokenError
	if errors.As(f.aWrite5Err, &stale) {
		aFenced = fmt.Sprintf("Receives STALE_TOKEN (token %d < %d)", stale.Token, stale.LastAccepted)
	}
	aNaive := "Late write 5 over 8"
	if n.afterA != "5" {
		aNaive = "stock " + n.afterA
	}
	busy := func(err error) string {
		if errors.Is(err, fence.ErrBusy) {
			return "Lock busy"
		}
		return outcome("granted", err)
	}
	fmt.Fprintln(w, "Verification | Without fencing token | With token check |")
	fmt.Fprintln(w, "|---|---|---|")
	fmt.Fprintf(w, "B until t=5 | %s | %s |\n", busy(n.busyAt4), busy(f.busyAt4))
	fmt.Fprintf(w, "B after t=5 | %s | %s |\n", yes(n.bWrite8Err, "Writes value 8"), yes(f.bWrite8Err, fmt.Sprintf("Writes value 8 with token %d", f.tokenB)))
	fmt.Fprintf(w, "A resumed at t=7 | %s | %s |\n", yes(n.aWrite5Err, aNaive), aFenced)
	fmt.Fprintf(w, "Retry write B | %s | %s |\n", yes(n.retry9Err, "Allowed"), yes(f.retry9Err, fmt.Sprintf("Allowed with same token %d", f.tokenB)))
	fmt.Fprintf(w, "Result | Remaining stock %s%s | Remaining stock %s, last_token %d |\n", n.afterA, naiveVerdict(n.afterA), f.final, f.finalLast)
	fmt.Fprintln(w, "(the naive result is the stock right after A's late write, as in the seed's run; B's retry then overwrote it with 9)")
	fmt.Fprintln(w)
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %s\n", mark, c.what)
	}
	if ok {
		fmt.Fprintln(w, "PASS: every row matches the seed")
	} else {
		fmt.Fprintln(w, "FAIL: some rows differ from the seed")
	}
}

func naiveVerdict(v string) string {
	if v == "5" {
		return " — old value won"
	}
	return ""
}

func labJSON(endpoint string, unit time.Duration, runs [2]labRun, checks []labCheck, ok bool) map[string]any {
	run := func(r labRun) map[string]any {
		errStr := func(err error) any {
			if err == nil {
				return nil
			}
			return errorJSON(err)
		}
		return map[string]any{
			"tokenA": uint64(r.tokenA), "tokenB": uint64(r.tokenB),
			"bAt4": errStr(r.busyAt4), "aLostAtUnits": float64(r.aLostAt) / float64(unit),
			"bWrite8": errStr(r.bWrite8Err), "aWrite5": errStr(r.aWrite5Err),
			"stockAfterA": r.afterA, "bRetry9": errStr(r.retry9Err),
			"stockFinal": r.final, "lastTokenFinal": uint64(r.finalLast),
		}
	}
	cs := make([]map[string]any, 0, len(checks))
	for _, c := range checks {
		cs = append(cs, map[string]any{"check": c.what, "ok": c.ok})
	}
	return map[string]any{"server": endpoint, "unit": unit.String(), "naive": run(runs[0]),
		"fenced": run(runs[1]), "checks": cs, "ok": ok}
}
