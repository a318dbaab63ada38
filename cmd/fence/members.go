package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence/api/apierr"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
	"github.com/fenceworks/fence/client"
)

const membersUsage = `[list] | add ID RAFTADDR | remove ID | transfer [ID]

  fence members                   list the members: id, raft address, suffrage, role,
                                  leader, last contact with the leader, applied index
                                  (each as the member reports it; "unreachable" when
                                  it does not answer)
  fence members add ID RAFTADDR   add node ID, listening for raft on RAFTADDR, as a voter
  fence members remove ID         remove member ID
  fence members transfer [ID]     hand leadership to voter ID (default: any voter)

Changes go to the leader (the node asked forwards them); each is idempotent,
so a change whose reply was lost may be repeated. With several --server URLs
(or FENCE_SERVER=url1,url2) the next is asked when one is unreachable or
knows no leader.

Exit status of the listing, as fence status's (the table or --json is
printed whatever it is): 0 a leader is known and every member answered;
6 no leader is known (an election under way, no majority, or the node
asked is waiting to be added); 1 a member did not answer (the table says
which), or no --server node could be asked. --wait D asks again until the
answer would exit 0 or D passes (e.g. right after starting a cluster:
fence members --wait 30s), then prints the last answer.
`

// membersCmd lists or changes the cluster's members (ClusterService).
func membersCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("members", membersUsage, g, stderr)
	wait := duration(fs, "wait", 0, "list: ask again until a leader is known and every member answers, up to this long")
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	pos = append(pos, after...)
	verb := "list"
	if len(pos) > 0 {
		verb, pos = pos[0], pos[1:]
	}
	want := map[string][2]int{"list": {0, 0}, "add": {2, 2}, "remove": {1, 1}, "transfer": {0, 1}}
	n, ok := want[verb]
	if !ok {
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("members: unknown subcommand %q (want add, remove or transfer; none lists the members)", verb)})
	}
	if len(pos) < n[0] || len(pos) > n[1] {
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("members %s: want %s", verb, map[string]string{
			"list": "no arguments", "add": "ID RAFTADDR", "remove": "ID", "transfer": "at most one ID",
		}[verb])})
	}
	if *wait != 0 && verb != "list" {
		return fail(g, stdout, stderr, &usageError{"members " + verb + ": --wait is for the listing only"})
	}
	ctx, cancel := g.context(*wait)
	defer cancel()
	hc := g.httpClient()
	defer hc.CloseIdleConnections()
	switch verb {
	case "list":
		var (
			res  *fencev1.MembersResponse
			code int
		)
		err := waitHealthy(ctx, *wait, func() (int, error) {
			// A node that knows no leader (a removed member still
			// running, one cut off) is not the cluster's last word: the
			// next endpoint is asked, and its answer kept only if none
			// knows one.
			var leaderless *fencev1.MembersResponse
			var err error
			res, err = onEndpoints(ctx, g.server, hc, func(c fencev1connect.ClusterServiceClient) (*fencev1.MembersResponse, error) {
				r, err := msgOf(c.Members(ctx, connect.NewRequest(&fencev1.MembersRequest{})))
				if err == nil && membersExit(r) == exitNoLeader {
					if leaderless == nil {
						leaderless = r
					}
					return nil, connect.NewError(connect.CodeUnavailable, errors.New("this node knows no leader"))
				}
				return r, err
			})
			if err != nil && leaderless != nil {
				res, err = leaderless, nil
			}
			if err != nil {
				return exitCodeOf(err), err
			}
			code = membersExit(res)
			return code, nil
		})
		if err != nil {
			return membersFail(g, stdout, stderr, err)
		}
		if g.json {
			emit(g, stdout, "", membersJSON(res))
		} else {
			printMembers(stdout, res)
		}
		if code == exitNoLeader {
			fmt.Fprintln(stderr, "fence: members: no leader known")
		}
		return code
	case "add":
		_, err := onEndpoints(ctx, g.server, hc, func(c fencev1connect.ClusterServiceClient) (*fencev1.AddMemberResponse, error) {
			return msgOf(c.AddMember(ctx, connect.NewRequest(&fencev1.AddMemberRequest{Id: pos[0], RaftAddr: pos[1]})))
		})
		if err != nil {
			return membersFail(g, stdout, stderr, err)
		}
		emit(g, stdout, fmt.Sprintf("added %s (%s) as a voter", pos[0], pos[1]), map[string]any{"added": pos[0], "raftAddr": pos[1]})
	case "remove":
		res, err := onEndpoints(ctx, g.server, hc, func(c fencev1connect.ClusterServiceClient) (*fencev1.RemoveMemberResponse, error) {
			return msgOf(c.RemoveMember(ctx, connect.NewRequest(&fencev1.RemoveMemberRequest{Id: pos[0]})))
		})
		if err != nil {
			return membersFail(g, stdout, stderr, err)
		}
		human := "removed " + pos[0]
		if !res.GetWasMember() {
			human = pos[0] + " is not a member (nothing removed)"
		}
		emit(g, stdout, human, map[string]any{"removed": pos[0], "wasMember": res.GetWasMember()})
	case "transfer":
		id := ""
		if len(pos) == 1 {
			id = pos[0]
		}
		res, err := onEndpoints(ctx, g.server, hc, func(c fencev1connect.ClusterServiceClient) (*fencev1.TransferLeadershipResponse, error) {
			return msgOf(c.TransferLeadership(ctx, connect.NewRequest(&fencev1.TransferLeadershipRequest{Id: id})))
		})
		if err != nil {
			return membersFail(g, stdout, stderr, err)
		}
		leader := res.GetLeader()
		human := "leadership transferred; new leader: " + leader
		if leader == "" {
			human = "leadership transferred; the new leader is not known yet (fence members shows it)"
		}
		emit(g, stdout, human, map[string]any{"leader": leader})
	}
	return exitOK
}

// membersExit is the exit status of a listing: exitNoLeader when no member
// is marked leader, exitError when a member did not answer, else exitOK.
func membersExit(res *fencev1.MembersResponse) int {
	if !slices.ContainsFunc(res.GetMembers(), (*fencev1.Member).GetLeader) {
		return exitNoLeader
	}
	if slices.ContainsFunc(res.GetMembers(), func(m *fencev1.Member) bool { return m.GetStatus() == nil }) {
		return exitError
	}
	return exitOK
}

// waitHealthy calls ask until it returns exitOK, an exit status other than
// exitError or exitNoLeader (a usage error, a refusal: asking again cannot
// change it), wait has passed since the first call, or ctx ends; wait 0
// asks once. It returns ask's last error.
func waitHealthy(ctx context.Context, wait time.Duration, ask func() (int, error)) error {
	deadline := time.Now().Add(wait)
	for {
		code, err := ask()
		if code != exitError && code != exitNoLeader || wait <= 0 || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(min(200*time.Millisecond, time.Until(deadline))):
		}
	}
}

// onEndpoints makes call against the servers of the comma-separated list
// in turn: the next is asked when one cannot be reached or answers
// unavailable (no leader known, shutting down). Every ClusterService call
// is safe to repeat. A refusal comes back as the typed error of package
// fence (INVALID_ARGUMENT: exit 2).
func onEndpoints[T any](ctx context.Context, servers string, hc *http.Client, call func(fencev1connect.ClusterServiceClient) (*T, error)) (*T, error) {
	return onServers(ctx, servers, func(url string) fencev1connect.ClusterServiceClient {
		return fencev1connect.NewClusterServiceClient(hc, url)
	}, call)
}

// onServers makes call, on a client newClient makes for each server of
// the comma-separated list in turn, until one answers: the next is asked
// when one cannot be reached or answers unavailable (no leader known, not
// the leader, shutting down); any other refusal ends it. The error is the
// typed error of package fence.
func onServers[C, T any](ctx context.Context, servers string, newClient func(url string) C, call func(C) (*T, error)) (*T, error) {
	var err error
	for _, url := range strings.Split(servers, ",") {
		url = strings.TrimSuffix(strings.TrimSpace(url), "/")
		if url == "" {
			continue
		}
		var res *T
		res, err = call(newClient(url))
		if err == nil {
			return res, nil
		}
		if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
			err = &client.UnreachableError{URL: url, Err: op}
		} else if connect.CodeOf(err) != connect.CodeUnavailable {
			return nil, apierr.FromConnect(err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err == nil {
		err = &usageError{"no server URL (--server or FENCE_SERVER)"}
	}
	return nil, apierr.FromConnect(err)
}

// msgOf is the message of a response, or the call's error.
func msgOf[T any](r *connect.Response[T], err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

// printMembers prints the members as a table.
func printMembers(w io.Writer, res *fencev1.MembersResponse) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRAFT ADDR\tSUFFRAGE\tROLE\tLEADER\tLAST CONTACT\tAPPLIED\tTERM")
	for _, m := range res.GetMembers() {
		leader := ""
		if m.GetLeader() {
			leader = "*"
		}
		st := m.GetStatus()
		if st == nil {
			role := "unreachable"
			if e := m.GetError(); e != "" && !strings.HasPrefix(e, "unreachable") {
				role, _, _ = strings.Cut(e, ":") // "wrong node"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t-\t-\t-\n", m.GetId(), dash(m.GetRaftAddr()), m.GetSuffrage(), role, leader)
			continue
		}
		contact := "-"
		if lc := st.GetLastContact(); lc != nil && st.GetRole() != "leader" {
			contact = lc.AsDuration().Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", m.GetId(), dash(m.GetRaftAddr()), m.GetSuffrage(), st.GetRole(), leader, contact, st.GetAppliedIndex(), st.GetTerm())
	}
	tw.Flush()
	for _, m := range res.GetMembers() {
		if m.GetStatus() == nil && m.GetError() != "" {
			fmt.Fprintf(w, "%s: %s\n", m.GetId(), m.GetError())
		}
	}
	if by := res.GetAnsweredBy(); !slices.ContainsFunc(res.GetMembers(), func(m *fencev1.Member) bool { return m.GetId() == by }) {
		fmt.Fprintf(w, "(%s, which answered, is not in the configuration it knows: waiting to be added, or removed)\n", by)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// membersJSON is the --json form of a listing: the API's field names,
// numbers as numbers, durations as strings ("12ms").
func membersJSON(res *fencev1.MembersResponse) map[string]any {
	ms := []map[string]any{}
	for _, m := range res.GetMembers() {
		o := map[string]any{"id": m.GetId(), "raftAddr": m.GetRaftAddr(), "suffrage": m.GetSuffrage(), "leader": m.GetLeader()}
		if st := m.GetStatus(); st != nil {
			s := map[string]any{
				"role": st.GetRole(), "leaderId": st.GetLeaderId(), "leaderAddr": st.GetLeaderAddr(),
				"term": st.GetTerm(), "commitIndex": st.GetCommitIndex(), "appliedIndex": st.GetAppliedIndex(),
				"lastToken": st.GetLastToken(), "ready": st.GetReady(),
			}
			if lc := st.GetLastContact(); lc != nil {
				s["lastContact"] = lc.AsDuration().String()
			}
			o["status"] = s
		} else {
			o["error"] = m.GetError()
		}
		ms = append(ms, o)
	}
	return map[string]any{"members": ms, "answeredBy": res.GetAnsweredBy()}
}

// membersFail is fail, with a membership change refused by the cluster
// (FAILED_PRECONDITION: a conflict, a single node, a node of another
// cluster) exiting 4 like the other refusals.
func membersFail(g *globals, stdout, stderr io.Writer, err error) int {
	code := fail(g, stdout, stderr, err)
	if code == exitError && connect.CodeOf(err) == connect.CodeFailedPrecondition {
		return exitRefused
	}
	return code
}
