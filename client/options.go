package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fenceworks/fence"
)

// Option configures a Client.
type Option func(*config)

// Protocol is the wire protocol a Client speaks.
type Protocol int

const (
	// ProtocolConnect is the Connect protocol with protobuf binary (default).
	ProtocolConnect Protocol = iota
	// ProtocolGRPC is gRPC over HTTP/2 (h2c for http:// endpoints).
	ProtocolGRPC
	// ProtocolConnectJSON is the Connect protocol with protobuf JSON.
	ProtocolConnectJSON
)

type config struct {
	httpClient *http.Client
	// userHTTPClient: httpClient came from WithHTTPClient (the session's
	// stream uses it too).
	userHTTPClient bool
	protocol       Protocol
	drift          float64
	logger         *slog.Logger
	backoffMin     time.Duration
	backoffMax     time.Duration
	// attemptTimeout bounds one attempt (plus the wait of a waiting
	// acquire); failFast: a first attempt that cannot connect fails the call.
	attemptTimeout time.Duration
	failFast       bool
	// noSession: every lease is standalone (WithoutSession); sessionTTL:
	// the TTL of the Client's session (WithSessionTTL).
	noSession  bool
	sessionTTL time.Duration
	// endpoints: more server URLs (WithEndpoints); dialer opens the default
	// HTTP clients' connections (WithDialer); headers go on every request
	// (WithHeader).
	endpoints []string
	dialer    dialFunc
	headers   http.Header
	// ctxHeaders set headers from each call's context (WithContextHeaders).
	ctxHeaders []func(ctx context.Context, h http.Header)
	// tls: the TLS config of the default HTTP clients (WithTLS).
	tls *tls.Config
	// leanAddrs: the endpoints' lean session ports (WithLeanSessions).
	leanAddrs []string
	// inOrder: start at the first endpoint instead of spreading Clients
	// over them (WithEndpointsInOrder).
	inOrder bool
}

// dialFunc opens a connection, as net.Dialer.DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// WithEndpoints adds server URLs to the one (or the comma-separated list)
// given to New: the nodes of a cluster. The Client uses one at a time,
// sticks to it while it works and moves to the next when it fails (see
// New).
func WithEndpoints(urls ...string) Option {
	return func(cfg *config) { cfg.endpoints = append(cfg.endpoints, urls...) }
}

// WithEndpointsInOrder makes the Client start at the first endpoint (and
// move on in the order given) instead of at the endpoint New spreads it to.
// For a list that states a preference: a node on the same machine first,
// say. Without it, the Clients of one process start at successive
// endpoints from a random one, so that their sessions — and the work of
// reading, validating and forwarding their requests — spread over the
// nodes (docs/clients.md, "Which node a Client uses").
func WithEndpointsInOrder() Option { return func(cfg *config) { cfg.inOrder = true } }

// WithDialer makes the Client's own HTTP clients (not one given with
// WithHTTPClient) open their connections with dial instead of a plain TCP
// dial: to reach a server through a tunnel or a multiplexed port (a Fence
// node dials its leader's API over the raft port this way).
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) Option {
	return func(cfg *config) { cfg.dialer = dial }
}

// WithTLS makes the Client's own HTTP clients (not one given with
// WithHTTPClient) speak TLS with cfg to https:// endpoints: RootCAs is the
// CA that signed the server's certificate (nil: the system's), and
// Certificates (or GetClientCertificate) the client certificate a server
// with --client-cert-auth asks for. HTTP/2 is negotiated by ALPN (the
// session's stream and gRPC need it). Every endpoint must then be https://:
// New refuses an http:// one rather than send in plain text.
//
// A handshake that fails for a reason no retry changes (the server's
// certificate is not from a trusted CA, has expired or does not name the
// host; the server refused the client's certificate or does not speak TLS)
// fails the call at once with a *TLSError naming the cause.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}

// WithHeader adds an HTTP header to every request the Client sends (a
// Fence node marks the calls it forwards to its leader with one).
func WithHeader(key, value string) Option {
	return func(cfg *config) {
		if cfg.headers == nil {
			cfg.headers = http.Header{}
		}
		cfg.headers.Add(key, value)
	}
}

// WithBearerToken authenticates every request with token, a secret made by
// `fence auth bootstrap` or `fence token create` (sent as
// "Authorization: Bearer <token>"). Use it with WithTLS off loopback: a
// bearer token sent in clear text can be replayed by whoever sees it.
func WithBearerToken(token string) Option {
	return WithHeader("Authorization", "Bearer "+token)
}

// WithContextHeaders calls set with each request's context and headers
// before it is sent (a Fence node forwarding a call to its leader passes on
// the principal it authenticated this way).
func WithContextHeaders(set func(ctx context.Context, h http.Header)) Option {
	return func(cfg *config) { cfg.ctxHeaders = append(cfg.ctxHeaders, set) }
}

func defaultConfig() config {
	return config{
		drift:      fence.DefaultDrift,
		logger:     slog.New(slog.DiscardHandler),
		backoffMin: 25 * time.Millisecond,
		backoffMax: time.Second,

		attemptTimeout: DefaultAttemptTimeout,
		sessionTTL:     DefaultSessionTTL,
	}
}

// DefaultSessionTTL is the TTL of a Client's session when WithSessionTTL is
// not given.
const DefaultSessionTTL = 10 * time.Second

// WithoutSession turns the Client's session off: every lease is then
// standalone, with its own TTL and its own keepalive (one goroutine and one
// timer per lease), and every call is a unary HTTP/1.1 request — the
// behaviour of clients before sessions.
func WithoutSession() Option { return func(cfg *config) { cfg.noSession = true } }

// WithSessionTTL sets the TTL of the Client's session (default
// DefaultSessionTTL, 10s; at least fence.MinTTL, checked by New). The
// session is kept alive every TTL/3, and its leases are lost locally when
// its safe deadline passes without a successful keepalive.
func WithSessionTTL(d time.Duration) Option { return func(cfg *config) { cfg.sessionTTL = d } }

// DefaultAttemptTimeout bounds one attempt of a call when WithAttemptTimeout
// is not given.
const DefaultAttemptTimeout = 10 * time.Second

// WithAttemptTimeout bounds each attempt of a call: an attempt without an
// answer after d (after wait + d for an Acquire with Wait) is abandoned and
// the call retries, with the same request_id or op_id, within its context
// (default DefaultAttemptTimeout, 10s). The keepalive bounds its own
// attempts by TTL/3 instead. d <= 0 keeps the default.
func WithAttemptTimeout(d time.Duration) Option {
	return func(cfg *config) {
		if d > 0 {
			cfg.attemptTimeout = d
		}
	}
}

// WithFailFast makes a call whose first attempt cannot connect to the
// server at all (connection refused, unknown host, no route) fail at once
// with an *UnreachableError instead of retrying until its context ends.
// Failures after the server was reached are retried as usual. Command-line
// tools want this; long-running workers usually do not (a server restarting
// refuses connections for a moment).
func WithFailFast() Option { return func(cfg *config) { cfg.failFast = true } }

// WithHTTPClient sets the HTTP client. For ProtocolGRPC, and for the
// session's stream (unless WithoutSession), it must speak HTTP/2 (for
// http:// endpoints, unencrypted HTTP/2).
func WithHTTPClient(c *http.Client) Option {
	return func(cfg *config) { cfg.httpClient, cfg.userHTTPClient = c, c != nil }
}

// WithProtocol chooses the wire protocol (default ProtocolConnect).
func WithProtocol(p Protocol) Option { return func(cfg *config) { cfg.protocol = p } }

// WithDrift sets the clock-rate bound used for safe deadlines (default
// fence.DefaultDrift, 1%). Values outside [0, 0.5] are clamped.
func WithDrift(drift float64) Option {
	return func(cfg *config) { cfg.drift = min(max(drift, 0), 0.5) }
}

// WithLogger sets the logger for retries and lease loss (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(cfg *config) {
		if l != nil {
			cfg.logger = l
		}
	}
}

// WithBackoff sets the retry backoff: the first pause and the greatest
// (defaults 25ms and 1s; pauses double, with jitter). After a server
// answered Unavailable (it waits for a leader) pauses stop growing at
// 250ms, or at most if that is less; moving to an endpoint the call has
// not tried yet costs no pause.
func WithBackoff(first, most time.Duration) Option {
	return func(cfg *config) {
		if first > 0 {
			cfg.backoffMin = first
		}
		if most >= cfg.backoffMin {
			cfg.backoffMax = most
		}
	}
}

// AcquireOption configures one Acquire.
type AcquireOption func(*acquireConfig)

// DefaultTTL is the TTL of a lease when Acquire is given no TTL option.
const DefaultTTL = 10 * time.Second

// acquireConfig is an Acquire's request, as its options set it (its Name
// is the call's), and how its lease is kept.
type acquireConfig struct {
	req       fence.AcquireRequest
	keepAlive time.Duration
	// own: TTL or KeepAlive was given: the lease is standalone.
	own bool
}

// TTL sets the lease TTL (default DefaultTTL, 10s; at least fence.MinTTL).
// A lease with its own TTL is standalone even on a Client with a session:
// it has its own keepalive and does not end with the session.
func TTL(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.req.TTL, c.own = d, true } }

// Owner sets the owner label (default "hostname:pid").
func Owner(s string) AcquireOption { return func(c *acquireConfig) { c.req.Owner = s } }

// Wait makes Acquire queue FIFO on the server for up to d when the lock is
// held (default 0: try once and return *fence.BusyError).
func Wait(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.req.Wait = d } }

// Shared takes the lock in shared mode: beside other shared holders, never
// beside an exclusive one (the default). A queued exclusive request is
// served before shared requests that come after it. Every grant, shared or
// not, has a token of its own.
func Shared() AcquireOption { return func(c *acquireConfig) { c.req.Mode = fence.Shared } }

// Permits takes one of n permits of the lock: at most n holders at once,
// each with its own lease and token (a semaphore; at most
// fence.MaxPermits). Every acquirer of the lock must name the same n while
// anybody holds or waits for it; another n is refused with
// *fence.PermitsMismatchError.
func Permits(n uint32) AcquireOption { return func(c *acquireConfig) { c.req.Permits = n } }

// LockDelay sets the lock-delay that follows an expiry of this lease.
func LockDelay(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.req.LockDelay = d } }

// RequestID sets the idempotency key of the acquire. By default each Acquire
// call makes a fresh random id and reuses it for all its retries; set it to
// learn, after a call whose outcome is unknown, whether it was granted: the
// same id returns the same lease.
func RequestID(id string) AcquireOption { return func(c *acquireConfig) { c.req.RequestID = id } }

// KeepAlive sets the interval of background renewals (default TTL/3). A
// negative value disables them: the lease then lives until its deadline
// unless renewed with Lease.Renew. Like TTL, it makes the lease standalone.
func KeepAlive(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.keepAlive, c.own = d, true }
}

// OpOption configures one Write or Add.
type OpOption func(*opConfig)

type opConfig struct {
	opID   string
	signed fence.SignedToken
}

// OpID sets the op_id of a write (default: fresh random per call, reused
// across its retries). A repeated op_id returns the saved result with
// Replayed set; the same op_id with another payload is refused with
// fence.ErrOpConflict.
func OpID(id string) OpOption { return func(c *opConfig) { c.opID = id } }

// Signed sends the token's signed form (Lease.SignedToken) with a write,
// add or delete: the server verifies its proof against the cluster's key
// set, for the lock named like the resource, before it applies anything,
// and refuses one that does not hold with *fence.ForgedTokenError
// (errors.Is fence.ErrForgedToken). Its token must be the call's.
func Signed(st fence.SignedToken) OpOption { return func(c *opConfig) { c.signed = st } }
