package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/fenceworks/fence/client"
)

const defaultServer = "http://127.0.0.1:7420"

// globals are the flags every subcommand accepts, before or after its name.
type globals struct {
	server    string
	serverSet bool // --server was given (not only FENCE_SERVER or the default)
	json      bool
	timeout   time.Duration
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", g.server, "server `URL` (env FENCE_SERVER)")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON object")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long (added to any --wait)")
}

// subcommand runs with the globals parsed so far and its own arguments.
type subcommand func(g *globals, args []string, stdout, stderr io.Writer) int

var subcommands = map[string]subcommand{
	"serve":   serveCmd,
	"acquire": acquireCmd,
	"renew":   renewCmd,
	"release": releaseCmd,
	"locks":   locksCmd,
	"write":   writeCmd,
	"add":     addCmd,
	"read":    readCmd,
	"run":     runCmd,
	"lab":     labCmd,
	"version": versionCmd,
}

const usageText = `usage: fence [--server URL] [--json] [--timeout D] COMMAND [ARGS]

commands:
  serve [--listen ADDR] [--data-dir DIR] [--max-ttl D] [--log-store wal|bolt]
                                                         run a single-node server
  acquire NAME --ttl D [--owner S] [--wait D] [--request-id S] [--lock-delay D]
  renew NAME --token N [--ttl D]
  release NAME --token N
  locks [PREFIX]
  write RESOURCE --token N --value V [--op-id S]
  add RESOURCE --token N --delta N [--op-id S]
  read RESOURCE
  run NAME --ttl D [--wait D] [--grace D] -- CMD ARGS...   run CMD while holding NAME
  lab [--unit D]                                          play the seed's scenario
  guard max-token ...                                     inspect a guard store
  version

exit codes: 0 ok, 1 error, 2 usage, 3 busy, 4 refused (stale token, not holder, ...)
`

// run is the whole CLI; main only exits with its result.
func run(args []string, stdout, stderr io.Writer) int {
	g := &globals{server: defaultServer, timeout: 10 * time.Second}
	if s := os.Getenv("FENCE_SERVER"); s != "" {
		g.server = s
	}
	fs := flag.NewFlagSet("fence", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	g.noteServerFlag(fs)
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "guard" {
		if g.json && len(rest) > 0 { // the global --json applies to guard commands too
			rest = append([]string{rest[0], "--json"}, rest[1:]...)
		}
		return guardCmd(rest, stdout, stderr)
	}
	if name == "help" {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	cmd, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(stderr, "fence: unknown command %q\n%s", name, usageText)
		return exitUsage
	}
	return cmd(g, rest, stdout, stderr)
}

// newFlagSet returns the flag set of a subcommand, with the globals.
func newFlagSet(name, usage string, g *globals, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fence "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fence %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	g.register(fs)
	return fs
}

// parseArgs parses flags placed anywhere among the positional arguments.
// Arguments after a "--" are returned in after, unparsed.
func parseArgs(fs *flag.FlagSet, args []string) (pos, after []string, err error) {
	if i := slices.Index(args, "--"); i >= 0 {
		args, after = args[:i], args[i+1:]
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, after, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// parseExact parses args and requires exactly n positional arguments named
// by what.
func parseExact(fs *flag.FlagSet, args []string, what ...string) ([]string, error) {
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	pos = append(pos, after...)
	if len(pos) != len(what) {
		err := fmt.Errorf("want %d argument(s) %v, got %d", len(what), what, len(pos))
		fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
		fs.Usage()
		return nil, err
	}
	return pos, nil
}

// wasSet reports whether fs parsed the flag name, so that a required flag
// given an empty or zero value is told apart from one left out.
func wasSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// noteServerFlag records whether fs parsed --server.
func (g *globals) noteServerFlag(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) { g.serverSet = g.serverSet || f.Name == "server" })
}

// dial returns a client for --server.
func (g *globals) dial() (*client.Client, error) {
	return client.New(g.server)
}

// call sets up one API call: a client and the command's context (see
// context). done closes both.
func (g *globals) call(extra time.Duration) (c *client.Client, ctx context.Context, done func(), err error) {
	c, err = g.dial()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := g.context(extra)
	return c, ctx, func() { cancel(); c.Close() }, nil
}

// context returns the command's context: canceled by SIGINT/SIGTERM and
// after --timeout plus extra.
func (g *globals) context(extra time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if g.timeout <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout+extra)
	return ctx, func() { cancel(); stop() }
}
