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
	"github.com/fenceworks/fence/daemon"
)

const labUsage = `[--server URL] [--unit D] [--embedded] [--json]

Plays the paused-worker story (docs/story.md) against a real server, twice,
in real time (one story second = --unit):
  t=0  worker A acquires a lease with a TTL of 5 and then pauses: no renewals
  t=4  worker B tries to acquire: refused, BUSY
  t=5  A's lease expires; A's code does not stop on its own
  t=6  B acquires (a greater token) and writes stock 8
  t=7  A wakes and writes stock 5 with its old token
Run 1 is without fencing: a store that accepts every write, so A's late 5
overwrites B's 8 (a lost update). Run 2 is with fencing: the write carries
the token and the server's fenced store refuses A's (STALE_TOKEN); B's
retry with its own token is accepted and the stock ends at 8. It prints
both timelines and exits 0 only if every row came out as the story says.

The story is paced by the wall clock. A play whose timeline slipped — a
step so late, on a loaded machine, that what the story expects of it no
longer follows (B's try answered after t=5, when A's lease may have ended;
B's acquire at t=6 still finding A's lease; A's client reporting the loss
after t=7) — is played again with --unit doubled, up to 4 plays (each
noted on stderr); when every play slipped it exits 1.

It plays against the server of --server or FENCE_SERVER when either is
given (lock and resource names get a random suffix, so a used server is
fine; the tokens are that server's); otherwise, or with --embedded, each
run gets a fresh server in a temporary directory, so both start at token 1.
`

// labCmd plays the paused-worker story (docs/story.md) against a real
// server, twice — with a naive store that accepts every write, and with the
// fenced store — and prints each run's timeline with what it observed. It
// exits 0 only if every row came out as the story says.
func labCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lab", labUsage, g, stderr)
	unit := duration(fs, "unit", 200*time.Millisecond, "real time of one story second")
	embedded := fs.Bool("embedded", false, "play against temporary embedded servers even when --server or FENCE_SERVER is set")
	if _, err := parseExact(fs, args); err != nil {
		return usageExit(err)
	}
	if *unit < 2*fence.MinTTL {
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("lab: --unit must be at least %s", 2*fence.MinTTL)})
	}
	g.noteServerFlag(fs)
	if *embedded && wasSet(fs, "server") {
		return fail(g, stdout, stderr, &usageError{"lab: give --server or --embedded, not both"})
	}
	useEmbedded := !g.serverSet || *embedded

	id := strings.ToLower(rand.Text()[:8])
	var (
		runs  [2]labRun
		notes []string // the plays whose timeline slipped, and why
	)
	for play := 1; ; play++ {
		var code int
		runs, code = playLab(g, stdout, stderr, id, play, *unit, useEmbedded)
		if code != exitOK {
			return code
		}
		slipped := slips(runs)
		if slipped == "" {
			break
		}
		if play == maxLabPlays {
			fmt.Fprintf(stderr, "fence lab: the story's timeline slipped in each of %d plays (1 story second up to %s): %s\n%s\n",
				maxLabPlays, *unit, slipped, strings.Join(notes, "\n"))
			return exitError
		}
		notes = append(notes, fmt.Sprintf("play %d, 1 story second = %s: the timeline slipped (%s); played again with %s",
			play, *unit, slipped, 2**unit))
		*unit *= 2
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "fence lab: %s\n", n)
	}
	checks := append(runs[0].checkNaive(), runs[1].checkFenced()...)
	ok := true
	for _, c := range checks {
		ok = ok && c.ok
	}
	if g.json {
		server := g.server
		if useEmbedded {
			server = "embedded"
		}
		emit(g, stdout, "", labJSON(server, *unit, runs, checks, ok))
	} else {
		printLab(stdout, runs[0].where, *unit, runs, checks, ok)
	}
	if !ok {
		return exitError
	}
	return exitOK
}

// maxLabPlays bounds how often the story is played again with its unit
// doubled after its timeline slipped (200ms up to 1.6s by default).
const maxLabPlays = 4

// playLab plays both runs of the story (naive, then fenced) with lock and
// resource names of id, one story second = unit. A non-zero code is the
// exit status of a run that could not be played (reported on stderr).
func playLab(g *globals, stdout, stderr io.Writer, id string, play int, unit time.Duration, useEmbedded bool) ([2]labRun, int) {
	var runs [2]labRun
	ctx, cancel := g.context(20 * unit)
	defer cancel()
	endpoint, where := g.server, "given"
	for i, mode := range []string{"naive", "fenced"} {
		if useEmbedded {
			url, stop, err := startLabServer()
			if err != nil {
				return runs, fail(g, stdout, stderr, fmt.Errorf("lab: embedded server: %w", err))
			}
			defer stop()
			endpoint, where = url, "embedded, temporary, one per run"
		}
		a, err := client.New(endpoint)
		if err != nil {
			return runs, fail(g, stdout, stderr, err)
		}
		b, _ := client.New(endpoint)
		// Each play has names of its own: a slipped play may leave its
		// locks held (until their TTL) and its resource written.
		name := fmt.Sprintf("lab-%s-%d/%s", id, play, mode)
		var store labStore = &naiveStore{}
		if mode == "fenced" {
			store = &fencedStore{c: b, resource: fmt.Sprintf("lab-%s-%d/fenced/stock/sku-42", id, play)}
		}
		runs[i] = playStory(ctx, a, b, name+"/sku-42", store, unit, mode == "fenced")
		runs[i].server, runs[i].where = endpoint, where
		a.Close()
		b.Close()
		if runs[i].err != nil {
			return runs, fail(g, stdout, stderr, fmt.Errorf("lab (%s): %w", mode, runs[i].err))
		}
	}
	return runs, exitOK
}

// slips says which runs' timeline slipped and how ("" if none did).
func slips(runs [2]labRun) string {
	var s []string
	for i, r := range runs {
		if r.slipped != "" {
			s = append(s, fmt.Sprintf("run %d: %s", i+1, r.slipped))
		}
	}
	return strings.Join(s, "; ")
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
	s, err := daemon.New(daemon.Config{DataDir: dir, Logger: quiet})
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

// seconds renders a real duration in story seconds.
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

// printLab prints the two runs as two tables, each with its own run's
// tokens and stock, then the checks and the verdict.
func printLab(w io.Writer, where string, unit time.Duration, runs [2]labRun, checks []labCheck, ok bool) {
	n, f := runs[0], runs[1]
	fmt.Fprintf(w, "fence lab: the paused-worker story (docs/story.md), played twice; 1 story second = %s\n", unit)
	fmt.Fprintf(w, "server: %s (%s)\n", serversOf(runs), where)
	lost := func(r labRun) string {
		if r.aLostAt == 0 {
			return "A's client still believed it held the lease"
		}
		return fmt.Sprintf("A's client reported the lease lost at %s; A's code keeps running", seconds(r.aLostAt, unit))
	}
	header := func() {
		fmt.Fprintln(w, "| Moment | Event | Expected | Observed |")
		fmt.Fprintln(w, "|---|---|---|---|")
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 1, WITHOUT fencing: a plain TTL lock, and a store that accepts every write (no token check)")
	fmt.Fprintln(w)
	header()
	fmt.Fprintf(w, "| t=0 | A acquires the lease (TTL 5), then pauses | granted | token %d |\n", n.tokenA)
	fmt.Fprintf(w, "| t=4 | B tries to acquire | BUSY | %s |\n", outcome("granted", n.busyAt4))
	fmt.Fprintf(w, "| t=5 | A's lease expires | A's code does not stop on its own | %s |\n", lost(n))
	fmt.Fprintf(w, "| t=6 | B acquires and writes stock 8 | granted, write accepted | token %d, %s |\n", n.tokenB, outcome(n.bWrite8, n.bWrite8Err))
	fmt.Fprintf(w, "| t=7 | A wakes and writes stock 5 (token %d) | accepted: overwrites B's 8 | %s |\n", n.tokenA, outcome(n.aWrite5, n.aWrite5Err))
	fmt.Fprintf(w, "| end | the stock | 5: B's update is lost | stock %s%s |\n", n.afterA, naiveVerdict(n.afterA))

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 2, WITH fencing: the same timeline; every write carries its token, and the server's fenced store compares it")
	fmt.Fprintln(w)
	header()
	fmt.Fprintf(w, "| t=0 | A acquires the lease (TTL 5), then pauses | granted | token %d |\n", f.tokenA)
	fmt.Fprintf(w, "| t=4 | B tries to acquire | BUSY | %s |\n", outcome("granted", f.busyAt4))
	fmt.Fprintf(w, "| t=5 | A's lease expires | A's code does not stop on its own | %s |\n", lost(f))
	fmt.Fprintf(w, "| t=6 | B acquires and writes stock 8 | granted (a greater token), write accepted | token %d, %s |\n", f.tokenB, outcome(f.bWrite8, f.bWrite8Err))
	fmt.Fprintf(w, "| t=7 | A wakes and writes stock 5 (token %d) | refused: STALE_TOKEN, %d < %d | %s |\n", f.tokenA, f.tokenA, f.tokenB, outcome(f.aWrite5, f.aWrite5Err))
	fmt.Fprintf(w, "| t=7 | B retries its write of 8 (token %d) | accepted: equal tokens are allowed | %s |\n", f.tokenB, outcome(f.retry, f.retryErr))
	fmt.Fprintf(w, "| end | the stock | 8, last_token %d: B's update stands | stock %s, last_token %d |\n", f.tokenB, f.final, f.finalLast)
	fmt.Fprintln(w)

	fmt.Fprintf(w, "Without fencing the stock ends at %s; with fencing at %s.\n\n", n.afterA, f.final)
	for _, c := range checks {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %s\n", mark, c.what)
	}
	if ok {
		fmt.Fprintln(w, "PASS: every row matches the story (docs/story.md)")
	} else {
		fmt.Fprintln(w, "FAIL: some rows differ from the story (docs/story.md)")
	}
}

// serversOf names the runs' server: one URL, or both when each run had its own.
func serversOf(runs [2]labRun) string {
	if runs[0].server == runs[1].server {
		return runs[0].server
	}
	return "run 1 " + runs[0].server + ", run 2 " + runs[1].server
}

func naiveVerdict(v string) string {
	if v == "5" {
		return " — B's 8 was overwritten: the old value won"
	}
	return ""
}

func labJSON(server string, unit time.Duration, runs [2]labRun, checks []labCheck, ok bool) map[string]any {
	run := func(r labRun, fenced bool) map[string]any {
		errStr := func(err error) any {
			if err == nil {
				return nil
			}
			return errorJSON(err)
		}
		m := map[string]any{
			"server": r.server, "tokenA": uint64(r.tokenA), "tokenB": uint64(r.tokenB),
			"bAt4": errStr(r.busyAt4), "aLostAtUnits": float64(r.aLostAt) / float64(unit),
			"bWrite8": errStr(r.bWrite8Err), "aWrite5": errStr(r.aWrite5Err),
			"stockAfterA": r.afterA, "stockFinal": r.final,
		}
		if fenced {
			m["bRetry8"] = errStr(r.retryErr)
			m["lastTokenFinal"] = uint64(r.finalLast)
		}
		return m
	}
	cs := make([]map[string]any, 0, len(checks))
	for _, c := range checks {
		cs = append(cs, map[string]any{"check": c.what, "ok": c.ok})
	}
	return map[string]any{"server": server, "unit": unit.String(), "naive": run(runs[0], false),
		"fenced": run(runs[1], true), "checks": cs, "ok": ok}
}
