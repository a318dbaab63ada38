package bench

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/fenceworks/fence/client"
)

func init() { Register(fenceLean{}) }

// fenceLean is fence-session over the lean session port (issue 24, item
// 1): the same client, sessions and session-bound leases, with the
// session's stream on `fence serve --session-addr` (client.WithLeanSessions)
// instead of SessionService.Stream over HTTP/2; unary calls (the session's
// Open) stay on the API port. Its server is a fence of its own started
// with the lean port, so fence-session and fence-lean in one run compare
// the two transports round for round.
type fenceLean struct{}

func (fenceLean) Name() string   { return "fence-lean" }
func (fenceLean) Server() string { return "fence-lean" }
func (fenceLean) Fenced() bool   { return true }

// LeanEnv names the variable that holds the fence-lean server's lean
// session port (set by StartFenceLean, inherited by the runner's children).
const LeanEnv = "FENCEBENCH_LEAN_ADDR"

// LeanAddrsEnv names the variable that maps a fence-lean cluster's API
// addresses to its nodes' lean session ports (API=LEAN,…; set by
// StartFenceLeanCluster).
const LeanAddrsEnv = "FENCEBENCH_LEAN_ADDRS"

func (fenceLean) Open(ctx context.Context, addr string, workers int) (Client, error) {
	var leans []string
	if !strings.Contains(addr, ",") {
		lean := os.Getenv(LeanEnv)
		if lean == "" {
			return nil, fmt.Errorf("fence-lean: $%s is not set (StartFenceLean sets it)", LeanEnv)
		}
		leans = []string{lean}
	} else {
		m := map[string]string{}
		for _, p := range strings.Split(os.Getenv(LeanAddrsEnv), ",") {
			if a, l, ok := strings.Cut(p, "="); ok {
				m[a] = l
			}
		}
		for _, a := range strings.Split(addr, ",") {
			if m[a] == "" {
				return nil, fmt.Errorf("fence-lean: no lean port for %s in $%s (StartFenceLeanCluster sets it)", a, LeanAddrsEnv)
			}
			leans = append(leans, m[a])
		}
	}
	return &fenceSessionClient{addr: addr, clients: map[int]*client.Client{}, scheme: "http",
		opts: []client.Option{client.WithLeanSessions(leans...)}}, nil
}

// StartFenceLean runs `fence serve` as StartFence does, with its lean
// session port on another free loopback port, named in $FENCEBENCH_LEAN_ADDR.
func StartFenceLean(bin, tmp string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	lean := fmt.Sprintf("127.0.0.1:%d", port)
	if err := os.Setenv(LeanEnv, lean); err != nil {
		return nil, err
	}
	return startFence(bin, tmp, "fence-lean", nil, "--session-addr", lean)
}
