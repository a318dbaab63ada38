package server

import (
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/state"
)

// Bounds on what one tenant's streams hold of Config.MaxStreams.
//
// A principal may hold at most Config.MaxStreamsPerPrincipal open streams
// (0: no quota), or the quota its roles set (`fence role quota ROLE
// streams=N`: the largest of its roles', state.Quota.Streams): its next stream is refused RESOURCE_EXHAUSTED naming
// config.max_streams_per_principal and the principal, and takes no slot of
// MaxStreams, so other principals open theirs as before. With checking
// off a stream has no principal and only MaxStreams binds (as with every
// per-principal quota: one tenant). The quota binds admins too. It is a
// limit of each process, like MaxConnsPerPrincipal (streams are not
// replicated state).
//
// A stream whose first message has not come Config.StreamFirstMessageTimeout
// after it took its slot is ended DEADLINE_EXCEEDED and gives the slot back,
// so a stream that is opened and then says nothing holds no slot for long.

const (
	// DefaultMaxStreamsPerPrincipal is the `fence serve` default of
	// Config.MaxStreamsPerPrincipal: a tenth of DefaultMaxStreams, the
	// share of the global cap the session quota gives one principal
	// (--max-sessions-per-principal), and far above what one client
	// needs (one stream for each session it keeps open at once).
	DefaultMaxStreamsPerPrincipal = DefaultMaxStreams / 10
	// DefaultStreamFirstMessageTimeout is the default of
	// Config.StreamFirstMessageTimeout, as long as ReadHeaderTimeout: a
	// client sends a stream's first message as soon as it opens it.
	DefaultStreamFirstMessageTimeout = 10 * time.Second
)

// principalCounts counts what each principal holds of one kind (its
// connections, its streams: a limit of each process, not replicated).
type principalCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more of principal's, or refuses it when principal holds
// max already (max 0 or no principal: no quota), naming what is counted
// and the config field that bounds it. release gives it back.
func (pc *principalCounts) take(principal string, max int, what, field string) (release func(), err error) {
	if principal == "" || max <= 0 {
		return func() {}, nil
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if n := pc.n[principal]; n >= max {
		return nil, &fence.ResourceExhaustedError{
			Limit: fmt.Sprintf("%s of principal %q (config.%s or its roles' quota)", what, principal, field),
			Bound: fmt.Sprintf("at most %d", max), Got: fmt.Sprint(n),
		}
	}
	if pc.n == nil {
		pc.n = map[string]int{}
	}
	pc.n[principal]++
	return func() {
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if pc.n[principal]--; pc.n[principal] <= 0 {
			delete(pc.n, principal)
		}
	}, nil
}

// streamQuota is principal's quota of streams: its roles' (the largest
// they set), else Config.MaxStreamsPerPrincipal.
func (s *Server) streamQuota(principal string) int {
	if principal == "" || s.deps.Auth == nil {
		return s.cfg.MaxStreamsPerPrincipal
	}
	var q int
	s.deps.Auth.ReadAuth(func(m *state.Machine) { q = m.QuotaOf(principal).Streams })
	if q > 0 {
		return q
	}
	return s.cfg.MaxStreamsPerPrincipal
}

// receiveFirst receives a stream's first message within
// Config.StreamFirstMessageTimeout: past it the request body is closed
// (the Receive returns) and the stream ends DEADLINE_EXCEEDED naming the
// bound. Without a streamConn (Handler mounted without serveStreams) only
// the HTTP server's own deadlines bound the wait.
func (s *Server) receiveFirst(st sessionTransport) (*fencev1.SessionRequest, error) {
	d := s.cfg.StreamFirstMessageTimeout
	t := time.AfterFunc(d, st.closeBody)
	first, err := st.Receive()
	if !t.Stop() {
		// Late, or the body was closed just as the message came: either
		// way the stream cannot go on.
		return nil, connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("no first message on the session stream within %s (config.stream_first_message_timeout): the stream is closed", d))
	}
	return first, err
}
