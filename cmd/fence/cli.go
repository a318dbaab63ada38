package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenceworks/fence"
	"github.com/fenceworks/fence/client"
)

const defaultServer = "http://127.0.0.1:7420"

// globals are the flags every subcommand accepts, before or after its name.
type globals struct {
	server     string
	serverSet  bool   // --server or FENCE_SERVER was given (not only the default)
	serverFrom string // where server came from: "--server", "FENCE_SERVER" or "" (the default)
	cmd        string // the subcommand, for the error line ("fence: CMD: ...")
	json       bool
	timeout    time.Duration
	stdout     io.Writer // where --help goes
	tls        clientTLSFlags
	// authToken is the bearer secret sent with every request
	// (--auth-token, FENCE_AUTH_TOKEN; not FENCE_TOKEN, which fence run
	// gives its child).
	authToken string
}

func (g *globals) register(fs *flag.FlagSet) {
	g.registerServer(fs)
	g.registerLocal(fs)
}

// registerServer defines --server, for the commands that talk to a server.
func (g *globals) registerServer(fs *flag.FlagSet) {
	fs.Var(serverValue{g}, "server", "server `URL` (HOST:PORT means http://HOST:PORT, https:// with --cacert, --cert or --key), or a cluster's nodes as a comma-separated list (env FENCE_SERVER)")
	g.tls.register(fs)
	fs.StringVar(&g.authToken, "auth-token", g.authToken, "`SECRET`: the bearer token of `fence auth bootstrap` or `fence token create`, sent with every request (env FENCE_AUTH_TOKEN)")
}

// registerLocal defines the globals of every command but serve: --json and
// --timeout.
func (g *globals) registerLocal(fs *flag.FlagSet) {
	fs.BoolVar(&g.json, "json", g.json, "print one JSON object (field names as in the API's JSON)")
	durationVar(fs, &g.timeout, "timeout", g.timeout, "give up after this long (added to any --wait)")
}

// serverValue is --server: a comma-separated list of server URLs. It is
// checked, and each HOST:PORT made http://HOST:PORT, once the command's
// flags are parsed (parseArgs: normalizeServer), so that FENCE_SERVER is
// checked the same way and every command says the same thing of a bad one.
type serverValue struct{ g *globals }

func (v serverValue) String() string {
	if v.g == nil { // the zero value flag.PrintDefaults makes
		return ""
	}
	return v.g.server
}

func (v serverValue) Set(s string) error {
	v.g.server, v.g.serverSet, v.g.serverFrom = s, true, "--server"
	return nil
}

// normalizeServer checks g.server and rewrites it with every entry a base
// URL: an entry without a scheme (HOST:PORT, as etcdctl's --endpoints
// takes and as fence serve --listen is given) gets http://, or https://
// when a TLS flag (--cacert, --cert, --key) is given, as does the default
// server. Anything else that is not an http or https URL with a host is a
// usage error naming where the list came from. It loads the TLS files.
func (g *globals) normalizeServer() error {
	if err := g.tls.load(); err != nil {
		return err
	}
	scheme := "http://"
	if g.tls.on() {
		scheme = "https://"
		if !g.serverSet && g.server == defaultServer {
			g.server = "https://" + strings.TrimPrefix(defaultServer, "http://")
		}
	}
	var out []string
	for _, raw := range strings.Split(g.server, ",") {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = scheme + s
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.RawQuery != "" || u.Fragment != "" {
			return g.badServer(strings.TrimSpace(raw))
		}
		out = append(out, strings.TrimSuffix(s, "/"))
	}
	if len(out) == 0 {
		return g.badServer(g.server)
	}
	g.server = strings.Join(out, ",")
	return nil
}

func (g *globals) badServer(entry string) error {
	from := g.serverFrom
	if from == "" {
		from = "--server"
	}
	return &usageError{fmt.Sprintf("%s %q: want a URL such as http://127.0.0.1:7420, or HOST:PORT (several: comma-separated)", from, entry)}
}

// subcommand runs with the globals parsed so far and its own arguments.
type subcommand func(g *globals, args []string, stdout, stderr io.Writer) int

var subcommands = map[string]subcommand{
	"serve":   serveCmd,
	"hold":    holdCmd,
	"delete":  deleteCmd,
	"acquire": acquireCmd,
	"renew":   renewCmd,
	"release": releaseCmd,
	"locks":   locksCmd,
	"watch":   watchCmd,
	"write":   writeCmd,
	"add":     addCmd,
	"read":    readCmd,
	"run":     runCmd,
	"elect":   electCmd,
	"lab":     labCmd,
	"members": membersCmd,
	"backup":  backupCmd,
	"restore": restoreCmd,
	"status":  statusCmd,
	"version": versionCmd,
	"cert":    certCmd,
	"auth":    authCmd,
	"token":   tokenCmd,
	"role":    roleCmd,
	"keys":    keysCmd,
}

const usageText = `usage: fence [global flags] COMMAND [ARGS]

global flags (before or after COMMAND):
  --server URL   the server (default http://127.0.0.1:7420; env FENCE_SERVER; HOST:PORT means
                 http://HOST:PORT); for a cluster, its nodes as URL,URL,... (the client fails
                 over between them)
  --cacert FILE  TLS: the CA that signed the server's certificate (env FENCE_CACERT); with any
                 TLS flag HOST:PORT and the default mean https://
  --cert FILE, --key FILE
                 TLS: the client certificate and key a server with --client-cert-auth
                 asks for (env FENCE_CERT, FENCE_KEY)
  --auth-token SECRET
                 the bearer token sent with every request, for a server with auth
                 enabled (env FENCE_AUTH_TOKEN; docs/security.md)
  --json         print one JSON object (field names as in the API's JSON; tokens as numbers)
  --timeout D    give up after D (default 10s; added to any --wait)
  -h, --help     print help (also: fence COMMAND --help)
  --version      print the version

commands:
  serve [--listen ADDR] [--data-dir DIR] [--max-ttl D] ...  run a single-node server
  serve ... --raft-addr HOST:PORT (--bootstrap | --join URL | --peers ID=HOST:PORT,...)
                                                          run a cluster node
                                                          (fence serve --help: all its flags)
  acquire NAME... --ttl D [--owner S] [--wait D] [--request-id S] [--lock-delay D]
  renew NAME --token N [--ttl D]
  release NAME --token N
  hold NAME [--ttl D] [--wait D] [--owner S]              hold NAME until Ctrl-C
  run NAME... --ttl D [--wait D] [--grace D] -- CMD ARGS...
                                                          run CMD while holding NAME
                                                          (run and hold wait for a held lock,
                                                          up to 24h; --wait 0 tries once;
                                                          acquire tries once unless --wait D;
                                                          several NAMEs: one set, all or none;
                                                          --shared, --permits N, --shared-lock NAME)
  elect NAME --ttl D [--value V] -- CMD ARGS...           run CMD only while leader of election NAME
  elect NAME --observe                                    print the leader as it changes
  locks [PREFIX] [--page-size N]                          list held, delayed or waited-for locks
  watch [PREFIX] [--name] [--after POS]                   follow the locks under PREFIX until Ctrl-C:
                                                          the state, then every change (--json: a line each)
  write RESOURCE --token N --value V [--op-id S]
  add RESOURCE --token N --delta N [--op-id S]
  delete RESOURCE --token N [--op-id S]
  read RESOURCE
  lab [--unit D] [--embedded]                             play the paused-worker story (docs/story.md)
  members [--wait D] [add ID RAFTADDR | remove ID | transfer [ID]]
                                                          list or change a cluster's members
  status [--wait D]                                       each --server node's own status (role,
                                                          indexes, counter, sessions, leases, ...)
  backup FILE                                             back up the node's state to FILE (- : stdout)
  restore FILE --data-dir DIR [--floor N] [--floor-from DSN]...
                                                          build a data dir from a backup (offline);
                                                          the token counter never goes back
  keys [--json | rotate | retire ID]                      the signing keys: list, the public key set,
                                                          rotate, retire (docs/operations.md)
  guard max-token ...                                     inspect a guard store
  guard repair ... (--resource R | --prefix P) [--ceiling N] [--dry-run]
                                                          lower tokens Fence never issued in a guard store
  cert [--dir DIR] [--hosts HOST,...]                     make a test CA (once) and server and client
                                                          certificates signed by it (docs/operations.md)
  auth bootstrap [--reset-index N --reset-secret S] | enable | disable | status
                                                          make the first admin token (once), turn
                                                          checking on or off, show who you are
  token create --role R[,R...] [--description D] [--ttl D] | list | revoke ID
  role add ROLE | grant ROLE PERM... | revoke ROLE [PERM...] | bind ROLE CERTNAME | list
                                                          PERM is KIND:PREFIX, KIND lock, read,
                                                          write or admin (docs/security.md)
  version

durations take a unit: 500ms, 30s, 5m, 1h.
exit codes: 0 ok, 1 error (server unreachable, ...), 2 usage or invalid argument,
  3 busy, 4 refused (stale token, not holder, ...), 5 resource exhausted (a server limit),
  6 no leader known (status, members: printed, but no node knows a leader; --wait D waits)
`

// run is the whole CLI; main only exits with its result.
func run(args []string, stdout, stderr io.Writer) int {
	g := &globals{server: defaultServer, timeout: 10 * time.Second, stdout: stdout}
	if s := os.Getenv("FENCE_SERVER"); s != "" {
		g.server, g.serverSet, g.serverFrom = s, true, "FENCE_SERVER"
	}
	g.tls.fromEnv(os.Getenv)
	g.authToken = os.Getenv("FENCE_AUTH_TOKEN")
	fs := flag.NewFlagSet("fence", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usageText) }
	g.register(fs)
	help := registerHelp(fs, stdout)
	showVersion := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		return usageExit(err)
	}
	if help.asked {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	g.noteServerFlag(fs)
	if *showVersion {
		return versionCmd(g, nil, stdout, stderr)
	}
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
		return guardCmd(g, rest, stdout, stderr)
	}
	if name == "help" {
		if len(rest) > 0 { // fence help COMMAND
			return run(append(rest[:1:1], "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	g.cmd = name
	cmd, ok := subcommands[name]
	if !ok {
		fmt.Fprintf(stderr, "fence: unknown command %q", name)
		if s := suggest(name); s != "" {
			fmt.Fprintf(stderr, "; did you mean %q?", s)
		}
		fmt.Fprintf(stderr, "\n(fence --help lists the commands)\n")
		return exitUsage
	}
	return cmd(g, rest, stdout, stderr)
}

// suggest returns the command closest to a mistyped name (at most two
// edits away, or a prefix of it), or "".
func suggest(name string) string {
	names := append(slices.Sorted(maps.Keys(subcommands)), "guard", "help")
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(name, n)
		if strings.HasPrefix(n, name) && len(name) >= 2 {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// helpFlag is -h/--help: asked is set when it was given. The flag package's
// own -h prints the usage to the error output; this one lets the caller
// print it to stdout and exit 0.
type helpFlag struct {
	asked bool
	out   io.Writer // stdout
}

func (h *helpFlag) String() string   { return "false" }
func (h *helpFlag) IsBoolFlag() bool { return true }
func (h *helpFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	h.asked = h.asked || v
	return err
}

// registerHelp defines -h and --help on fs; the usage goes to out.
func registerHelp(fs *flag.FlagSet, out io.Writer) *helpFlag {
	if out == nil {
		out = os.Stdout
	}
	h := &helpFlag{out: out}
	fs.Var(h, "h", "print this help on stdout (also --help)")
	fs.Var(h, "help", "print this help on stdout")
	return h
}

// durationValue is a time.Duration flag that explains a missing unit.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return errors.New("a duration needs a unit, e.g. 30s (500ms, 5m, 1h)")
		}
		if strings.Contains(err.Error(), "invalid duration") && durationShape.MatchString(s) {
			return errors.New("out of range: a duration is at most 2562047h (about 292 years)")
		}
		return errors.New("not a duration: want a number with a unit, e.g. 30s (500ms, 5m, 1h)")
	}
	*v.d = d
	return nil
}

// unitHint wraps a duration flag defined with fs.Duration, so that a
// number without a unit gets the same explanation as a durationValue.
type unitHint struct{ flag.Getter }

func (u unitHint) String() string {
	if u.Getter == nil { // the zero value flag.PrintDefaults makes
		return "0s"
	}
	return u.Getter.String()
}

func (u unitHint) Set(s string) error {
	if err := u.Getter.Set(s); err != nil {
		return durationValue{new(time.Duration)}.Set(s)
	}
	return nil
}

// hintDurationUnits makes every time.Duration flag of fs (those a
// subcommand defined with fs.Duration too) explain a missing unit, until
// restore is called (the usage then names them "duration" again).
func hintDurationUnits(fs *flag.FlagSet) (restore func()) {
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, isDuration := g.Get().(time.Duration); isDuration {
				orig[f], f.Value = f.Value, unitHint{g}
			}
		}
	})
	return func() {
		for f, v := range orig {
			f.Value = v
		}
		clear(orig)
	}
}

// durationVar defines a duration flag with durationValue.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	if !strings.Contains(usage, "`") {
		usage += ", a `duration` such as 30s"
	}
	fs.Var(durationValue{p}, name, usage)
}

// duration defines a duration flag and returns where its value goes.
func duration(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	durationVar(fs, p, name, def, usage)
	return p
}

// requireToken refuses a command whose --token was left out.
func requireToken(fs *flag.FlagSet, cmd string) error {
	if !wasSet(fs, "token") {
		return &usageError{cmd + ": --token is required"}
	}
	return nil
}

// newFlagSet returns the flag set of a subcommand, with the globals and
// -h/--help. parseArgs prints the usage to stdout on --help.
func newFlagSet(name, usage string, g *globals, stderr io.Writer) *flag.FlagSet {
	return newFlagSetWith(name, usage, g, stderr, g.register)
}

// newLocalFlagSet is newFlagSet for a command that talks to no server
// (restore, version): --json and --timeout, no --server.
func newLocalFlagSet(name, usage string, g *globals, stderr io.Writer) *flag.FlagSet {
	return newFlagSetWith(name, usage, g, stderr, g.registerLocal)
}

// newFlagSetWith is a subcommand's flag set with the globals register
// defines (nil: none, for serve) and -h/--help.
func newFlagSetWith(name, usage string, g *globals, stderr io.Writer, register func(*flag.FlagSet)) *flag.FlagSet {
	fs := flag.NewFlagSet("fence "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: fence %s %s\n", name, usage)
		fs.PrintDefaults()
	}
	if register != nil {
		register(fs)
	}
	registerHelp(fs, g.stdout)
	return fs
}

// checkHelp prints the usage to stdout and returns flag.ErrHelp when fs
// parsed -h or --help.
func checkHelp(fs *flag.FlagSet) error {
	f := fs.Lookup("help")
	if f == nil {
		return nil
	}
	h, ok := f.Value.(*helpFlag)
	if !ok || !h.asked {
		return nil
	}
	errOut := fs.Output()
	fs.SetOutput(h.out)
	fs.Usage()
	fs.SetOutput(errOut)
	return flag.ErrHelp
}

// parseArgs parses flags placed anywhere among the positional arguments.
// Arguments after a "--" are returned in after, unparsed.
func parseArgs(fs *flag.FlagSet, args []string) (pos, after []string, err error) {
	if i := slices.Index(args, "--"); i >= 0 {
		args, after = args[:i], args[i+1:]
	}
	restore := hintDurationUnits(fs)
	defer restore()
	for {
		if err := fs.Parse(args); err != nil {
			if !errors.Is(err, flag.ErrHelp) {
				// flag printed the error, then the usage: say it again
				// last, where a long usage (or a log's tail) leaves it seen.
				fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
			}
			return nil, nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			restore()
			if err := checkHelp(fs); err != nil {
				return nil, nil, err
			}
			if f := fs.Lookup("server"); f != nil {
				if sv, ok := f.Value.(serverValue); ok {
					if err := sv.g.normalizeServer(); err != nil {
						fmt.Fprintf(fs.Output(), "fence: %v\n", err)
						return nil, nil, err
					}
					if sv.g.timeout < 0 {
						err := fmt.Errorf("--timeout must be at least 0 (0: no limit), got %s", sv.g.timeout)
						fmt.Fprintf(fs.Output(), "fence: %v\n", err)
						return nil, nil, err
					}
				}
			}
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

// noteServerFlag records whether fs parsed --server (FENCE_SERVER is noted
// by run).
func (g *globals) noteServerFlag(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) { g.serverSet = g.serverSet || f.Name == "server" })
}

// dial returns a client for --server. A server that refuses the
// connection fails the command at once (client.WithFailFast), with a hint
// (see fail).
func (g *globals) dial() (*client.Client, error) {
	return client.New(g.server, g.clientOptions(client.WithFailFast())...)
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
// acquireKept dials the server and takes the locks of specs (one lock, or a
// set: acquireSpecs) with a lease the client
// keeps alive, for run and hold: the lease is bound to the client's session,
// whose TTL is ttl and whose keepalive (every TTL/3, over one stream) keeps
// it, and verifyHeld renews it every TTL/3 so that a release behind its back
// is noticed. SIGINT or SIGTERM during the wait abandons it (see context). On
// success the caller closes c (which closes the session: the lease is freed
// if it was not released).
func (g *globals) acquireKept(specs []fence.LockSpec, ttl, wait time.Duration, owner string) (c *client.Client, lease *client.Lease, err error) {
	c, err = client.New(g.server, g.clientOptions(client.WithFailFast(), client.WithSessionTTL(ttl))...)
	if err != nil {
		return nil, nil, err
	}
	opts := []client.AcquireOption{client.Wait(wait)}
	if owner != "" {
		opts = append(opts, client.Owner(owner))
	}
	ctx, cancel := g.context(wait)
	defer cancel()
	lease, err = acquireSpecs(ctx, c, specs, opts)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	verifyHeld(lease)
	return c, lease, nil
}

func (g *globals) context(extra time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if g.timeout <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout+extra)
	return ctx, func() { cancel(); stop() }
}

// durationShape is what time.ParseDuration reads when its value fits: a
// value of this shape that it refuses is out of range.
var durationShape = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)
