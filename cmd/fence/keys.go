package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"

	"github.com/fenceworks/fence"
	fencev1 "github.com/fenceworks/fence/api/fence/v1"
	"github.com/fenceworks/fence/api/fence/v1/fencev1connect"
)

const keysUsage = `[rotate | retire ID [--now]]

  fence keys            the cluster's signing keys: id, status (active: signs new
                        grants; verify-only; retiring: dropped once the leases it
                        signed are over; "public only": kept by a restore to
                        verify, never signs), live leases signed, when added
  fence keys --json     the public key set (a JSON Web Key Set with cluster_id and
                        restored_from): give it to the guards (docs/guards.md)
  fence keys rotate     add a key and sign every new grant with it from now on
                        (admin); the old keys keep verifying, and a lease keeps
                        the key it was granted under
  fence keys retire ID  retire key ID (admin): it is dropped from the key set once
                        no live lease is signed by it; not the active key
  fence keys retire ID --now
                        a leaked key (admin): dropped at once, even while live
                        leases are signed by it; they are signed by the active
                        key from then on, and their holders must fetch a new
                        proof (a renew or a get): guards given the new key set
                        refuse the old proofs at once

Rotate and retire go to the leader: with several --server URLs the next is
asked when one is not the leader.
`

// keyCall runs f against the KeyService of the first --server node that
// answers and is not unavailable.
func keyCall[T any](g *globals, f func(ctx context.Context, c fencev1connect.KeyServiceClient) (*T, error)) (*T, error) {
	ctx, cancel := g.context(0)
	defer cancel()
	hc := g.httpClient()
	defer hc.CloseIdleConnections()
	return onServers(ctx, g.server, func(url string) fencev1connect.KeyServiceClient {
		return fencev1connect.NewKeyServiceClient(hc, url)
	}, func(c fencev1connect.KeyServiceClient) (*T, error) { return f(ctx, c) })
}

func keysCmd(g *globals, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keys", keysUsage, g, stderr)
	now := fs.Bool("now", false, "with retire: drop the key at once, even while live leases are signed by it (a leaked key)")
	pos, after, err := parseArgs(fs, keyIDsLast(args))
	if err != nil {
		return usageExit(err)
	}
	verb, rest := verbOf(append(pos, after...))
	if *now && verb != "retire" {
		return fail(g, stdout, stderr, &usageError{"keys: --now goes with retire ID"})
	}
	switch {
	case verb == "" && len(rest) == 0:
		res, err := keyCall(g, func(ctx context.Context, c fencev1connect.KeyServiceClient) (*fencev1.ListKeysResponse, error) {
			return msgOf(c.ListKeys(ctx, connect.NewRequest(&fencev1.ListKeysRequest{})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		if g.json {
			ks, err := keySetOf(res)
			if err != nil {
				return fail(g, stdout, stderr, err)
			}
			b, _ := json.Marshal(ks)
			fmt.Fprintln(stdout, string(b))
			return exitOK
		}
		fmt.Fprintf(stdout, "cluster %s", res.GetClusterId())
		if from := res.GetRestoredFrom(); len(from) > 0 {
			fmt.Fprintf(stdout, " (restored from %v)", from)
		}
		fmt.Fprintln(stdout)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tLEASES\tADDED (SERVER TIME)")
		for _, k := range res.GetKeys() {
			status := k.GetStatus()
			if k.GetPublicOnly() {
				status += " (public only)" // restored: verifies, never signs
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", k.GetId(), status, k.GetLeases(), k.GetAddedAt().AsDuration())
		}
		tw.Flush()
	case verb == "rotate" && len(rest) == 0:
		res, err := keyCall(g, func(ctx context.Context, c fencev1connect.KeyServiceClient) (*fencev1.RotateKeyResponse, error) {
			return msgOf(c.RotateKey(ctx, connect.NewRequest(&fencev1.RotateKeyRequest{})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		emit(g, stdout, "signing with key "+res.GetKeyId()+" (give the guards the new key set: fence keys --json)", map[string]any{"keyId": res.GetKeyId()})
	case verb == "retire" && len(rest) == 1:
		res, err := keyCall(g, func(ctx context.Context, c fencev1connect.KeyServiceClient) (*fencev1.RetireKeyResponse, error) {
			return msgOf(c.RetireKey(ctx, connect.NewRequest(&fencev1.RetireKeyRequest{KeyId: rest[0], Force: *now})))
		})
		if err != nil {
			return fail(g, stdout, stderr, err)
		}
		if *now {
			emit(g, stdout, fmt.Sprintf("dropped %s now; %d live leases signed by it are signed by the active key from now on (their holders must fetch a new proof); give the guards the new key set: fence keys --json", rest[0], res.GetLeasesMoved()),
				map[string]any{"retired": rest[0], "now": true, "leasesMoved": res.GetLeasesMoved()})
		} else {
			emit(g, stdout, "retired "+rest[0]+" (dropped once no live lease is signed by it)", map[string]any{"retired": rest[0]})
		}
	default:
		return fail(g, stdout, stderr, &usageError{"keys: want no argument, rotate, or retire ID"})
	}
	return exitOK
}

// keySetOf is a ListKeys answer as the public key set.
func keySetOf(res *fencev1.ListKeysResponse) (*fence.KeySet, error) {
	ks := &fence.KeySet{ClusterID: res.GetClusterId(), RestoredFrom: res.GetRestoredFrom()}
	for _, k := range res.GetKeys() {
		pub, err := base64.RawURLEncoding.DecodeString(k.GetPublicKey())
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("key %s: bad public key %q from the server", k.GetId(), k.GetPublicKey())
		}
		ks.Keys = append(ks.Keys, fence.PublicKey{ID: k.GetId(), Key: pub})
	}
	return ks, nil
}

// keyIDsLast moves the ID after "retire" behind a "--" when it starts with
// '-': a key id is base64url, and one in 64 begins with '-', which the
// flag parser took for an unknown flag (a test's retire failed so).
func keyIDsLast(args []string) []string {
	i := slices.Index(args, "retire")
	if i < 0 || i+1 >= len(args) || slices.Contains(args, "--") {
		return args
	}
	id := args[i+1]
	if !strings.HasPrefix(id, "-") || len(id) != fence.KeyIDChars || strings.TrimLeft(id, "-") == "now" {
		return args
	}
	out := append(slices.Clone(args[:i+1]), args[i+2:]...)
	return append(out, "--", id)
}
