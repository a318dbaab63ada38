package state

import (
	"fmt"
	"slices"
	"sort"

	"github.com/fenceworks/fence/state/internal/statepb"
)

// The auth state in a snapshot: one message in the header (absent while
// nothing was ever set, so a store without auth writes the bytes it wrote
// before auth existed), roles by name, tokens by id.

type snapAuth struct {
	Enabled    bool
	Bootstraps uint64
	Roles      []Role      // by name
	Tokens     []AuthToken // by id
}

func (m *impl) snapAuth() *snapAuth {
	a := &m.auth
	if !a.enabled && a.bootstraps == 0 && len(a.tokens) == 0 && len(a.roles) == 0 {
		return nil
	}
	out := &snapAuth{Enabled: a.enabled, Bootstraps: a.bootstraps}
	for _, n := range m.roleNames() {
		r := a.roles[n]
		out.Roles = append(out.Roles, Role{Name: r.Name, Perms: slices.Clone(r.Perms), Certs: slices.Clone(r.Certs), Quota: r.Quota})
	}
	for _, id := range m.tokenIDs() {
		t := *a.tokens[id]
		t.Roles = slices.Clone(t.Roles)
		out.Tokens = append(out.Tokens, t)
	}
	return out
}

func pbAuth(a *snapAuth) *statepb.Auth {
	if a == nil {
		return nil
	}
	p := &statepb.Auth{Enabled: a.Enabled, Bootstraps: a.Bootstraps}
	for _, r := range a.Roles {
		pr := &statepb.AuthRole{Name: bs(r.Name), Quota: quotaPB(r.Quota)}
		for _, q := range r.Perms {
			pr.Perms = append(pr.Perms, permBytes(q))
		}
		for _, c := range r.Certs {
			pr.Certs = append(pr.Certs, []byte(c))
		}
		p.Roles = append(p.Roles, pr)
	}
	for _, t := range a.Tokens {
		pt := &statepb.AuthToken{Id: bs(t.ID), Hash: t.Hash, Description: bs(t.Description), ExpiresAt: t.ExpiresAt,
			Revoked: t.Revoked, CreatedAt: t.CreatedAt}
		for _, r := range t.Roles {
			pt.Roles = append(pt.Roles, []byte(r))
		}
		p.Tokens = append(p.Tokens, pt)
	}
	return p
}

func authOfPB(p *statepb.Auth) (*snapAuth, error) {
	if p == nil {
		return nil, nil
	}
	a := &snapAuth{Enabled: p.Enabled, Bootstraps: p.Bootstraps}
	for _, pr := range p.Roles {
		q, err := quotaOfPB(pr.Quota)
		if err != nil {
			return nil, err
		}
		r := Role{Name: string(pr.Name), Quota: q}
		for _, b := range pr.Perms {
			q, err := permOf(b)
			if err != nil {
				return nil, err
			}
			r.Perms = append(r.Perms, q)
		}
		for _, c := range pr.Certs {
			r.Certs = append(r.Certs, string(c))
		}
		a.Roles = append(a.Roles, r)
	}
	for _, pt := range p.Tokens {
		t := AuthToken{ID: string(pt.Id), Hash: pt.Hash, Description: string(pt.Description), ExpiresAt: pt.ExpiresAt,
			Revoked: pt.Revoked, CreatedAt: pt.CreatedAt}
		for _, r := range pt.Roles {
			t.Roles = append(t.Roles, string(r))
		}
		a.Tokens = append(a.Tokens, t)
	}
	return a, nil
}

// restoreAuth checks and installs a snapshot's auth state.
func (m *impl) restoreAuth(a *snapAuth) error {
	if a == nil {
		return nil
	}
	if a.Enabled && a.Bootstraps == 0 {
		return fmt.Errorf("auth enabled but never bootstrapped")
	}
	m.auth = authState{enabled: a.Enabled, bootstraps: a.Bootstraps}
	m.auth.init()
	for i, r := range a.Roles {
		if i > 0 && a.Roles[i-1].Name >= r.Name || validAuthName("role", r.Name) != nil {
			return fmt.Errorf("auth roles not sorted, repeated or badly named at %q", r.Name)
		}
		for j, q := range r.Perms {
			if q.Kind < PermLock || q.Kind > PermAdmin || j > 0 && !r.Perms[j-1].less(q) {
				return fmt.Errorf("auth role %q: bad or unsorted permission %q", r.Name, q.String())
			}
		}
		for j, c := range r.Certs {
			if c == "" || j > 0 && r.Certs[j-1] >= c {
				return fmt.Errorf("auth role %q: certificate names empty, unsorted or repeated", r.Name)
			}
		}
		if err := r.Quota.Validate(); err != nil {
			return fmt.Errorf("auth role %q: %w", r.Name, err)
		}
		m.auth.roles[r.Name] = &Role{Name: r.Name, Perms: r.Perms, Certs: r.Certs, Quota: r.Quota}
	}
	for i, t := range a.Tokens {
		if i > 0 && a.Tokens[i-1].ID >= t.ID || validAuthName("id", t.ID) != nil || checkHash(t.Hash) != nil ||
			len(t.Roles) == 0 || !sort.StringsAreSorted(t.Roles) {
			return fmt.Errorf("auth tokens not sorted, repeated or malformed at %q", t.ID)
		}
		m.auth.tokens[t.ID] = &AuthToken{ID: t.ID, Hash: t.Hash, Roles: t.Roles, Description: t.Description, CreatedAt: t.CreatedAt,
			ExpiresAt: t.ExpiresAt, Revoked: t.Revoked}
	}
	return nil
}
