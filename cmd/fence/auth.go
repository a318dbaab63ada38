package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

const authUsage = `bootstrap [--reset-index N --reset-secret S] | enable | disable | status

  fence auth bootstrap   make the role admin and the first admin token, and print
                         its secret once (works once per store; keep it safe).
                         With --reset-index N and the secret S (--reset-secret, or
                         better FENCE_RESET_SECRET: not seen by ps), one more
                         bootstrap when the server's data dir holds the file
                         auth-reset containing "N S": N the store's bootstraps
                         so far (a plain bootstrap's refusal says it), S a secret
                         of at least 32 characters (openssl rand -hex 16), the
                         file mode 600. How a
                         lost admin token is recovered (docs/operations.md)
  fence auth enable      turn checking on: every call then needs a token
                         (--auth-token or FENCE_AUTH_TOKEN) with a permission
  fence auth disable     turn checking off again
  fence auth status      whether checking is on, the bootstraps, and who you are

Changes go to the leader: with several --server URLs the next is asked when
one is not the leader.
`

const tokenUsage = `create --role R[,R...] [--description D] [--ttl D] | list | revoke ID

  fence token create --role app   make a token holding role app; its secret is
                                  printed once (only its SHA-256 is stored)
  fence token list                the tokens: id, roles, description, expiry, revoked
  fence token revoke ID           revoke token ID for good (every node refuses it
                                  once it has applied the revocation)
`

const roleUsage = `add ROLE | grant ROLE PERM... | revoke ROLE [PERM...] | bind ROLE CERTNAME | unbind ROLE CERTNAME | quota ROLE [KIND=N...] | list

  PERM is KIND:PREFIX: KIND lock (acquire, renew, release; sessions), read (get,
  list, read), write (write, add, delete) or admin; PREFIX the names it covers
  ("lock:jobs/" covers jobs/a and jobs/b/c; "read:" covers every name).

  fence role add ROLE              make an empty role
  fence role grant ROLE PERM...    add permissions (making the role if new)
  fence role revoke ROLE PERM...   remove permissions
  fence role revoke ROLE           remove the role (refused while a token holds it)
  fence role bind ROLE CERTNAME    a client with a verified certificate whose subject CN
                                   or a URI SAN is CERTNAME, and no token, is the principal
                                   cert:CERTNAME with ROLE's permissions (needs
                                   --trusted-ca-file on the server)
  fence role unbind ROLE CERTNAME  undo it
  fence role quota ROLE [KIND=N...]
                                   set ROLE's per-principal quotas, replacing its old ones:
                                   KIND sessions, waiters, ids, conns or streams (e.g. sessions=500
                                   ids=2000000); a kind not given, or 0, is the server's
                                   default (--max-*-per-principal). A principal gets the
                                   largest quota its roles set. No KIND: clear them all
  fence role list                  the roles, their permissions, certificate names and quotas
`

// onAuth calls the AuthService of the first --server node that answers
// and is not unavailable (a follower answers changes unavailable: the next
// is asked).
func onAuth[T any](ctx context.Context, servers string, hc *http.Client, call func(fencev1connect.AuthServiceClient) (*T, error)) (*T, error) {
	return onServers(ctx, servers, func(url string) fencev1connect.AuthServiceClient {
		return fencev1connect.NewAuthServiceClient(hc, url)
	}, call)
}

// authCall runs f against the AuthService with the command's context.
func authCall[T any](g *globals, f func(ctx context.Context, c fencev1connect.AuthServiceClient) (*T, error)) (*T, error) {
	ctx, cancel := g.context(0)
	defer cancel()
	hc := g.httpClient()
	defer hc.CloseIdleConnections()
	return onAuth(ctx, g.server, hc, func(c fencev1connect.AuthServiceClient) (*T, error) { return f(ctx, c) })
}

func verbOf(pos []string) (string, []string) {
	if len(pos) == 0 {
		return "", nil
	}
	return pos[0], pos[1:]
}

func authCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("auth", authUsage, g, stderr)
	reset := fs.Uint64("reset-index", 0, "bootstrap: the number in a server's auth-reset file (a second bootstrap)")
	resetSecret := fs.String("reset-secret", "", "bootstrap: the secret in a server's auth-reset file, with --reset-index (default $FENCE_RESET_SECRET)")
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	verb, rest := verbOf(append(pos, after...))
	if len(rest) > 0 {
		return fail(g, stdout, stderr, &usageError{"auth " + verb + ": no arguments"})
	}
	switch verb {
	case "bootstrap":
		if *resetSecret == "" {
			*resetSecret = os.Getenv("FENCE_RESET_SECRET")
		}
		switch {
		case *reset > 0 && *resetSecret == "":
			return fail(g, stdout, stderr, &usageError{"auth bootstrap --reset-index: give the auth-reset file's secret too (--reset-secret or FENCE_RESET_SECRET)"})
		case *reset == 0 && wasSet(fs, "reset-secret"):
			return fail(g, stdout, stderr, &usageError{"auth bootstrap --reset-secret: give the auth-reset file's number too (--reset-index)"})
		case *reset == 0:
			*resetSecret = "" // FENCE_RESET_SECRET left set: only a reset sends it
		}
		res, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.AuthBootstrapResponse, error) {
			return msgOf(c.Bootstrap(ctx, connect.NewRequest(&fencev1.AuthBootstrapRequest{ResetIndex: *reset, ResetSecret: *resetSecret})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, fmt.Sprintf("admin token %s:\n%s\n(shown once: keep it safe; use it with --auth-token or FENCE_AUTH_TOKEN, then fence auth enable)",
			res.GetToken().GetId(), res.GetSecret()), map[string]any{"id": res.GetToken().GetId(), "secret": res.GetSecret()})
	case "enable", "disable":
		_, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.AuthSetEnabledResponse, error) {
			return msgOf(c.SetEnabled(ctx, connect.NewRequest(&fencev1.AuthSetEnabledRequest{Enabled: verb == "enable"})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, "auth "+verb+"d", map[string]any{"enabled": verb == "enable"})
	case "status":
		res, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.AuthStatusResponse, error) {
			return msgOf(c.Status(ctx, connect.NewRequest(&fencev1.AuthStatusRequest{})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		who := res.GetPrincipal()
		if who == "" {
			who = "(anonymous)"
		}
		emit(g, stdout, fmt.Sprintf("enabled: %t\nbootstraps: %d\nyou: %s (admin: %t)", res.GetEnabled(), res.GetBootstraps(), who, res.GetAdmin()),
			map[string]any{"enabled": res.GetEnabled(), "bootstraps": res.GetBootstraps(), "principal": res.GetPrincipal(), "admin": res.GetAdmin()})
	default:
		return fail(g, stdout, stderr, &usageError{fmt.Sprintf("auth: want bootstrap, enable, disable or status, not %q", verb)})
	}
	return exitOK
}

func tokenCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("token", tokenUsage, g, stderr)
	roles := fs.String("role", "", "create: the token's roles, comma-separated")
	descr := fs.String("description", "", "create: what the token is for")
	ttl := duration(fs, "ttl", 0, "create: the token expires this long after it is made (server time; 0: never)")
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	verb, rest := verbOf(append(pos, after...))
	switch {
	case verb == "create" && len(rest) == 0:
		if *roles == "" {
			return fail(g, stdout, stderr, &usageError{"token create: --role R (one or more roles, comma-separated)"})
		}
		req := &fencev1.CreateTokenRequest{Roles: strings.Split(*roles, ","), Description: *descr}
		if *ttl > 0 {
			req.Ttl = durationpb.New(*ttl)
		}
		res, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.CreateTokenResponse, error) {
			return msgOf(c.CreateToken(ctx, connect.NewRequest(req)))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, fmt.Sprintf("token %s:\n%s\n(shown once)", res.GetToken().GetId(), res.GetSecret()),
			map[string]any{"id": res.GetToken().GetId(), "secret": res.GetSecret(), "roles": res.GetToken().GetRoles()})
	case verb == "list" && len(rest) == 0:
		res, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.ListTokensResponse, error) {
			return msgOf(c.ListTokens(ctx, connect.NewRequest(&fencev1.ListTokensRequest{})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		if g.json {
			var out []map[string]any
			for _, t := range res.GetTokens() {
				out = append(out, map[string]any{"id": t.GetId(), "roles": t.GetRoles(), "description": t.GetDescription(),
					"revoked": t.GetRevoked(), "expiresAt": t.GetExpiresAt().AsDuration().String()})
			}
			emit(g, stdout, "", map[string]any{"tokens": out})
			return exitOK
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tROLES\tREVOKED\tEXPIRES (SERVER TIME)\tDESCRIPTION")
		for _, t := range res.GetTokens() {
			exp := "never"
			if t.GetExpiresAt() != nil {
				exp = t.GetExpiresAt().AsDuration().String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\n", t.GetId(), strings.Join(t.GetRoles(), ","), t.GetRevoked(), exp, t.GetDescription())
		}
		tw.Flush()
	case verb == "revoke" && len(rest) == 1:
		_, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.RevokeTokenResponse, error) {
			return msgOf(c.RevokeToken(ctx, connect.NewRequest(&fencev1.RevokeTokenRequest{Id: rest[0]})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, "revoked "+rest[0], map[string]any{"revoked": rest[0]})
	default:
		return fail(g, stdout, stderr, &usageError{"token: want create --role R, list, or revoke ID"})
	}
	return exitOK
}

func roleCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("role", roleUsage, g, stderr)
	pos, after, err := parseArgs(fs, args)
	if err != nil {
		return usageExit(err)
	}
	verb, rest := verbOf(append(pos, after...))
	switch {
	case (verb == "add" && len(rest) == 1) || (verb == "grant" && len(rest) >= 2):
		_, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.GrantRoleResponse, error) {
			return msgOf(c.GrantRole(ctx, connect.NewRequest(&fencev1.GrantRoleRequest{Role: rest[0], Permissions: rest[1:]})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, fmt.Sprintf("role %s: granted %s", rest[0], strings.Join(rest[1:], " ")), map[string]any{"role": rest[0], "granted": rest[1:]})
	case verb == "revoke" && len(rest) >= 1:
		_, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.RevokeRoleResponse, error) {
			return msgOf(c.RevokeRole(ctx, connect.NewRequest(&fencev1.RevokeRoleRequest{Role: rest[0], Permissions: rest[1:]})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		human := fmt.Sprintf("role %s: revoked %s", rest[0], strings.Join(rest[1:], " "))
		if len(rest) == 1 {
			human = "role " + rest[0] + " removed"
		}
		emit(g, stdout, human, map[string]any{"role": rest[0], "revoked": rest[1:]})
	case (verb == "bind" || verb == "unbind") && len(rest) == 2:
		_, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.BindRoleResponse, error) {
			return msgOf(c.BindRole(ctx, connect.NewRequest(&fencev1.BindRoleRequest{Role: rest[0], CertName: rest[1], Unbind: verb == "unbind"})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, fmt.Sprintf("role %s: %s certificate name %q", rest[0], verb, rest[1]), map[string]any{"role": rest[0], verb: rest[1]})
	case verb == "quota" && len(rest) >= 1:
		q, err := parseRoleQuota(rest[1:])
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		_, err = authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.SetRoleQuotaResponse, error) {
			return msgOf(c.SetRoleQuota(ctx, connect.NewRequest(&fencev1.SetRoleQuotaRequest{Role: rest[0], Quota: q})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		human := fmt.Sprintf("role %s: quotas %s", rest[0], quotaText(q))
		emit(g, stdout, human, map[string]any{"role": rest[0], "quota": quotaJSON(q)})
	case verb == "list" && len(rest) == 0:
		res, err := authCall(g, func(ctx context.Context, c fencev1connect.AuthServiceClient) (*fencev1.ListRolesResponse, error) {
			return msgOf(c.ListRoles(ctx, connect.NewRequest(&fencev1.ListRolesRequest{})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		if g.json {
			out := map[string]any{}
			for _, r := range res.GetRoles() {
				out[r.GetName()] = map[string]any{"permissions": r.GetPermissions(), "certNames": r.GetCertNames(), "quota": quotaJSON(r.GetQuota())}
			}
			emit(g, stdout, "", map[string]any{"roles": out})
			return exitOK
		}
		for _, r := range res.GetRoles() {
			line := r.GetName() + "\t" + strings.Join(r.GetPermissions(), " ")
			if len(r.GetCertNames()) > 0 {
				line += "\tcertificates: " + strings.Join(r.GetCertNames(), " ")
			}
			if r.GetQuota() != nil {
				line += "\tquotas: " + quotaText(r.GetQuota())
			}
			fmt.Fprintln(stdout, line)
		}
	default:
		return fail(g, stdout, stderr, &usageError{"role: want add ROLE, grant ROLE PERM..., revoke ROLE [PERM...], bind ROLE CERTNAME, unbind ROLE CERTNAME or list"})
	}
	return exitOK
}
