package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

const statusUsage = `[--json]

Prints what each --server node reports of itself (ClusterService.NodeStatus,
never forwarded): id, role, leader, term, commit and applied index, token
counter, sessions, leases held, waiters, server time, slack, data dir size,
resources, the oldest remembered id's age, version. With several --server
URLs (a cluster's nodes) every node is asked, one block each; with --json one
JSON object per node, one per line (field names as in the API's JSON, numbers
as numbers, durations as strings such as "1.5s"), each with its "url".
A node that does not answer gets {"url": ..., "error": {...}}; the others
are still printed.

Exit status, as fence members's (whatever it is, every answer is printed):
0 every node answered and a leader is known; 6 no node that answered knows
a leader (an election under way, no majority, a node waiting to be added);
1 a node did not answer. --wait D asks again until the answer would exit 0
or D passes (e.g. right after starting a cluster), then prints the last
answer.

Under authentication a token that is not an admin's sees only role and
ready (a ready node knows a leader): the text form prints those two and a
line saying the rest needs an admin token; --json prints only "url",
"role" and "ready".
`

// statusCmd prints the NodeStatus of every --server node.
func statusCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", statusUsage, g, stderr)
	wait := duration(fs, "wait", 0, "ask again until every node answers and a leader is known, up to this long")
	if _, err := parseExact(fs, args); err != nil {
		return usageExit(err)
	}
	var urls []string
	for _, u := range strings.Split(g.server, ",") {
		if u = strings.TrimSuffix(strings.TrimSpace(u), "/"); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return fail(g, stdout, stderr, &usageError{"status: no server URL (--server or FENCE_SERVER)"})
	}
	ctx, cancel := g.context(*wait)
	defer cancel()
	hc := g.httpClient()
	defer hc.CloseIdleConnections()
	type answer struct {
		st  *fencev1.NodeStatusResponse
		err error
	}
	answers := make([]answer, len(urls))
	code := exitOK
	_ = waitHealthy(ctx, *wait, func() (int, error) {
		for i, url := range urls {
			st, err := nodeStatus(ctx, hc, url)
			answers[i] = answer{st, err}
		}
		code = exitOK
		leader, answered := false, false
		for _, a := range answers {
			if a.err != nil {
				if c := exitCodeOf(a.err); code == exitOK {
					code = c
				}
				continue
			}
			answered = true
			leader = leader || knowsLeader(a.st)
		}
		if answered && !leader {
			code = exitNoLeader
		}
		return code, nil
	})
	for i, url := range urls {
		st, err := answers[i].st, answers[i].err
		if err != nil {
			if g.json {
				_ = json.NewEncoder(stdout).Encode(map[string]any{"url": url, "error": errorJSON(err)})
			}
			// One line per node: the unreachable error names its URL
			// already; any other is prefixed with it.
			line := errorLine("status", err)
			var unreachable *client.UnreachableError
			var tlsErr *client.TLSError
			if !errors.As(err, &unreachable) && !errors.As(err, &tlsErr) {
				line = "fence: status: " + url + ": " + strings.TrimPrefix(line, "fence: status: ")
			}
			fmt.Fprintln(stderr, line)
			if h := caHint(g, err); h != "" {
				fmt.Fprintln(stderr, h)
			}
			continue
		}
		if g.json {
			emit(g, stdout, "", statusJSON(url, st))
			continue
		}
		if len(urls) > 1 {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "== %s ==\n", url)
		}
		printStatus(stdout, st)
	}
	if code == exitNoLeader {
		fmt.Fprintln(stderr, "fence: status: no leader known")
	}
	return code
}

// nodeStatus asks the node at url for its own status.
func nodeStatus(ctx context.Context, hc *http.Client, url string) (*fencev1.NodeStatusResponse, error) {
	res, err := fencev1connect.NewClusterServiceClient(hc, url).NodeStatus(ctx, connect.NewRequest(&fencev1.NodeStatusRequest{}))
	if err != nil {
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			return nil, &client.UnreachableError{URL: url, Err: op}
		}
		if te := client.TLSFailure(url, err); te != nil {
			return nil, te
		}
		return nil, apierr.FromConnect(err)
	}
	return res.Msg, nil
}

// limitedStatus reports whether st is what NodeStatus answers a principal
// that is not an admin under authentication: only role and ready (an
// admin's answer always names the node). Its other fields are absent, not
// zero, and are not printed as zeros.
func limitedStatus(st *fencev1.NodeStatusResponse) bool { return st.GetId() == "" }

// knowsLeader reports whether the node that answered st knows a leader. A
// non-admin's view has no leader id, but a ready node knows a leader
// (node.Ready): a follower's limited view is not "no leader known".
func knowsLeader(st *fencev1.NodeStatusResponse) bool {
	return st.GetRole() == "leader" || st.GetLeaderId() != "" || (limitedStatus(st) && st.GetReady())
}

// statusLine is one key of the text form, in print order.
type statusLine struct{ key, value string }

// statusLines are the text form of st: every field, "-" for an empty one.
func statusLines(st *fencev1.NodeStatusResponse) []statusLine {
	leader := dash(st.GetLeaderId())
	if a := st.GetLeaderAddr(); a != "" {
		leader += " (" + a + ")"
	}
	if limitedStatus(st) {
		return []statusLine{
			{"role", dash(st.GetRole())},
			{"ready", strconv.FormatBool(st.GetReady())},
			{"other fields", "need an admin token (this token's principal is shown only role and ready)"},
		}
	}
	contact := "-"
	if lc := st.GetLastContact(); lc != nil && st.GetRole() != "leader" {
		contact = durText(lc)
	}
	return []statusLine{
		{"node id", dash(st.GetId())},
		{"cluster id", dash(st.GetClusterId())},
		{"raft addr", dash(st.GetRaftAddr())},
		{"role", dash(st.GetRole())},
		{"leader", leader},
		{"last contact", contact},
		{"ready", strconv.FormatBool(st.GetReady())},
		{"term", strconv.FormatUint(st.GetTerm(), 10)},
		{"commit index", strconv.FormatUint(st.GetCommitIndex(), 10)},
		{"applied index", strconv.FormatUint(st.GetAppliedIndex(), 10)},
		{"last token", strconv.FormatUint(st.GetLastToken(), 10)},
		{"sessions", strconv.FormatUint(st.GetSessions(), 10)},
		{"leases held", strconv.FormatUint(st.GetLeasesHeld(), 10)},
		{"waiters", strconv.FormatUint(st.GetWaiters(), 10)},
		{"queued", strconv.FormatUint(st.GetQueued(), 10)},
		{"server time", durText(st.GetServerTime())},
		{"slack", durText(st.GetSlack())},
		{"oldest id age", durText(st.GetOldestIdAge())},
		{"remembered ids", idsText(st)},
		{"snapshot size", bytesText(st.GetSnapshotBytes())},
		{"resources", strconv.FormatUint(st.GetResources(), 10)},
		{"resource bytes", bytesText(st.GetResourceBytes())},
		{"data dir size", bytesText(st.GetDataDirBytes())},
		{"fatal", dash(st.GetFatal())},
		{"version", dash(st.GetVersion())},
		{"insecure listen", insecureText(st.GetInsecureListen())},
	}
}

// idsText is the remembered ids line: op_ids and request_ids, and a
// warning when one memory is near its cap.
func idsText(st *fencev1.NodeStatusResponse) string {
	s := strconv.FormatUint(st.GetRememberedOpIds(), 10) + " op_ids, " + strconv.FormatUint(st.GetRememberedRequestIds(), 10) + " request_ids"
	if st.GetIdMemoryNearCap() {
		s += " (NEAR THE CAP: at least 90% of --max-ids; new ids are refused once it is full of ids younger than --min-id-retention)"
	}
	return s
}

// insecureText is the insecure listen line: loud when set.
func insecureText(on bool) string {
	if on {
		return "YES (--insecure-listen: a port off loopback may speak no TLS; see the node's log)"
	}
	return "no"
}

// printStatus prints st as aligned "key: value" lines.
func printStatus(w io.Writer, st *fencev1.NodeStatusResponse) {
	lines := statusLines(st)
	width := 0
	for _, l := range lines {
		width = max(width, len(l.key)+1)
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%-*s %s\n", width, l.key+":", l.value)
	}
}

// statusJSON is the --json form of st: the API's field names, every field
// present, numbers as numbers, durations as strings; of a non-admin's view
// only what the server sent (url, role, ready), no made-up zeros.
func statusJSON(url string, st *fencev1.NodeStatusResponse) map[string]any {
	if limitedStatus(st) {
		return map[string]any{"url": url, "role": st.GetRole(), "ready": st.GetReady()}
	}
	lastContact := ""
	if lc := st.GetLastContact(); lc != nil {
		lastContact = lc.AsDuration().String()
	}
	return map[string]any{
		"url": url, "id": st.GetId(), "clusterId": st.GetClusterId(), "raftAddr": st.GetRaftAddr(),
		"role": st.GetRole(), "leaderId": st.GetLeaderId(), "leaderAddr": st.GetLeaderAddr(),
		"lastContact": lastContact, "ready": st.GetReady(), "term": st.GetTerm(),
		"commitIndex": st.GetCommitIndex(), "appliedIndex": st.GetAppliedIndex(), "lastToken": st.GetLastToken(),
		"sessions": st.GetSessions(), "leasesHeld": st.GetLeasesHeld(), "waiters": st.GetWaiters(), "queued": st.GetQueued(),
		"serverTime": st.GetServerTime().AsDuration().String(), "slack": st.GetSlack().AsDuration().String(),
		"oldestIdAge": st.GetOldestIdAge().AsDuration().String(),
		"resources":   st.GetResources(), "resourceBytes": st.GetResourceBytes(), "dataDirBytes": st.GetDataDirBytes(),
		"fatal": st.GetFatal(), "version": st.GetVersion(), "insecureListen": st.GetInsecureListen(),
		"rememberedOpIds": st.GetRememberedOpIds(), "rememberedRequestIds": st.GetRememberedRequestIds(),
		"idMemoryNearCap": st.GetIdMemoryNearCap(), "snapshotBytes": st.GetSnapshotBytes(),
	}
}

// durText prints d rounded to the millisecond (0s when absent).
func durText(d *durationpb.Duration) string {
	v := d.AsDuration()
	if v > time.Millisecond || v < -time.Millisecond {
		v = v.Round(time.Millisecond)
	}
	return v.String()
}

// bytesText is n in binary units with the exact count: "1.5 MiB (1572864
// bytes)"; under 1 KiB only the count: "3 B".
func bytesText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), 0
	for v >= unit-0.05 && i < 6 { // 1023.97 KiB is "1.0 MiB", not "1024.0 KiB"
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", v, "KMGTPE"[i-1], n)
}
