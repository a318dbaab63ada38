package state

import (
	"crypto/subtle"
	"slices"
	"sort"
	"strings"

	"github.com/fenceworks/fence"
)

// Authentication and permissions (docs/security.md). The machine keeps the
// auth state — whether checking is on, the bearer tokens (id, the SHA-256
// of the secret, roles, description, expiry in server time, revoked) and
// the roles (name, permissions by name prefix) — and records with every
// lease, queued request and session the principal that made it
// (Command.Principal, set by the server from the caller it authenticated).
//
// The machine never makes a secret: the node that receives a token create
// draws it (crypto/rand) and proposes only its hash, so a replay, a
// follower and a restore hold the same hashes and decide alike (R1).
//
// Ownership: a renew or release of a lease, a retry of a request_id, and
// any command on a session (keepalive, close, and everything sequenced on
// it) by a principal other than the one recorded is refused with a
// *fence.PermissionDeniedError and changes nothing, unless the command
// carries Admin. With authentication off the server sends Admin on every
// command, so nothing changes from before authentication existed.
//
// Bootstrap: the first OpAuthBootstrap creates the role "admin" (admin on
// every name) and the first token, holding it. A later one is refused
// unless its Attempt names the number of bootstraps so far (what the reset
// file in a server's data dir holds; docs/operations.md). Once
// bootstrapped, token and role changes and OpAuthEnable need Admin.

// PermKind is what a permission allows.
type PermKind uint8

// The permission kinds; their numbers are part of the log format.
const (
	PermLock  PermKind = 1 // acquire, renew, release a lock; sessions
	PermRead  PermKind = 2 // get, list locks; read resources
	PermWrite PermKind = 3 // write, add, delete resources
	PermAdmin PermKind = 4 // backup, members, leadership, tokens and roles
)

var permNames = [...]string{PermLock: "lock", PermRead: "read", PermWrite: "write", PermAdmin: "admin"}

// String is the kind's name: lock, read, write or admin.
func (k PermKind) String() string {
	if k >= PermLock && k <= PermAdmin {
		return permNames[k]
	}
	return "kind" + itoa(int64(k))
}

// ParsePermKind is the kind named s.
func ParsePermKind(s string) (PermKind, bool) {
	for k := PermLock; k <= PermAdmin; k++ {
		if permNames[k] == s {
			return k, true
		}
	}
	return 0, false
}

// Permission allows Kind on every name starting with Prefix ("" is every
// name).
type Permission struct {
	Kind   PermKind
	Prefix string
}

// String is "kind:prefix".
func (p Permission) String() string { return p.Kind.String() + ":" + p.Prefix }

// ParsePermission reads "kind:prefix" (the prefix may be empty).
func ParsePermission(s string) (Permission, error) {
	kind, prefix, _ := strings.Cut(s, ":")
	k, ok := ParsePermKind(kind)
	if !ok {
		return Permission{}, fence.Invalid("permission", "kind:prefix with kind lock, read, write or admin", s)
	}
	return Permission{Kind: k, Prefix: prefix}, nil
}

func (p Permission) less(q Permission) bool {
	if p.Kind != q.Kind {
		return p.Kind < q.Kind
	}
	return p.Prefix < q.Prefix
}

// Role is a named set of permissions (sorted), and the client
// certificate names (a subject CN or a URI SAN, sorted) bound to it.
type Role struct {
	Name  string
	Perms []Permission
	Certs []string
	// Quota is what the role sets of its principals' quotas (quota.go);
	// a zero field leaves that quota at the rules' default.
	Quota Quota
}

// AuthToken is a bearer token as stored: never its secret.
type AuthToken struct {
	ID          string
	Hash        []byte // SHA-256 of the secret, 32 bytes
	Roles       []string
	Description string
	CreatedAt   int64 // server time
	ExpiresAt   int64 // server time; 0: never
	Revoked     bool
}

// AdminRole is the role the first bootstrap creates: admin on every name.
// It cannot be changed or removed.
const AdminRole = "admin"

// Bounds of the auth state (each a constant of the format).
const (
	MaxAuthTokens     = 10000
	MaxRoles          = 1000
	MaxPermsPerRole   = 256
	MaxRolesPerToken  = 64
	MaxCertsPerRole   = 256
	maxAuthNameBytes  = 128
	maxAuthDescrBytes = 256
	authHashBytes     = 32
)

type authState struct {
	enabled    bool
	bootstraps uint64
	tokens     map[string]*AuthToken
	roles      map[string]*Role
}

func (a *authState) init() {
	if a.tokens == nil {
		a.tokens = map[string]*AuthToken{}
		a.roles = map[string]*Role{}
	}
}

// validAuthName: 1..128 bytes of [A-Za-z0-9._-].
func validAuthName(field, s string) error {
	ok := len(s) > 0 && len(s) <= maxAuthNameBytes
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fence.Invalid(field, "1 to 128 of A-Z a-z 0-9 . _ -", s)
	}
	return nil
}

func (m *impl) needAdmin(cmd Command) error {
	if m.auth.bootstraps > 0 && !cmd.Admin {
		return &fence.PermissionDeniedError{Principal: cmd.Principal, What: "admin"}
	}
	return nil
}

func checkHash(h []byte) error {
	if len(h) != authHashBytes {
		return fence.Invalid("hash", "32 bytes (SHA-256 of the secret)", itoa(int64(len(h)))+" bytes")
	}
	return nil
}

// authBootstrap applies OpAuthBootstrap: Name the token id, Value its hash,
// Attempt the bootstraps so far (0 the first time; a reset names the
// count the store has, read from the reset file).
func (m *impl) authBootstrap(cmd Command) Result {
	if err := first(validAuthName("id", cmd.Name), checkHash(cmd.Value)); err != nil {
		return Result{Err: err}
	}
	if m.auth.bootstraps > 0 && uint64(cmd.Attempt) != m.auth.bootstraps {
		return Result{Err: &fence.PermissionDeniedError{Principal: cmd.Principal, What: "bootstrap",
			Name: "already bootstrapped " + u64toa(m.auth.bootstraps) + " time(s); a reset file naming " + u64toa(m.auth.bootstraps) + " permits one more"}}
	}
	m.auth.init()
	if t := m.auth.tokens[cmd.Name]; t != nil {
		return Result{Err: &fence.OpConflictError{Field: "id", ID: cmd.Name}}
	}
	if len(m.auth.tokens) >= MaxAuthTokens {
		return Result{Err: fence.Exhausted("auth tokens", "at most "+utoa(MaxAuthTokens), utoa(len(m.auth.tokens)))}
	}
	m.auth.roles[AdminRole] = &Role{Name: AdminRole, Perms: []Permission{{Kind: PermAdmin}}}
	m.auth.tokens[cmd.Name] = &AuthToken{ID: cmd.Name, Hash: slices.Clone(cmd.Value), Roles: []string{AdminRole},
		Description: "bootstrap token " + u64toa(m.auth.bootstraps+1), CreatedAt: m.clock}
	m.auth.bootstraps++
	return Result{}
}

// authEnable applies OpAuthEnable: Delta != 0 turns checking on, 0 off.
func (m *impl) authEnable(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	if cmd.Delta != 0 && m.auth.bootstraps == 0 {
		return Result{Err: fence.Invalid("auth", "bootstrapped before it is enabled (fence auth bootstrap)", "not bootstrapped")}
	}
	m.auth.enabled = cmd.Delta != 0
	return Result{}
}

// tokenCreate applies OpTokenCreate: Name id, Value hash, Owner
// description, Roles, TTL (0: no expiry).
func (m *impl) tokenCreate(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	if m.auth.bootstraps == 0 {
		return Result{Err: fence.Invalid("auth", "bootstrapped first (fence auth bootstrap)", "not bootstrapped")}
	}
	if err := first(validAuthName("id", cmd.Name), checkHash(cmd.Value)); err != nil {
		return Result{Err: err}
	}
	if len(cmd.Owner) > maxAuthDescrBytes {
		return Result{Err: fence.Invalid("description", "at most 256 bytes", itoa(int64(len(cmd.Owner)))+" bytes")}
	}
	if cmd.TTL < 0 {
		return Result{Err: fence.Invalid("ttl", ">= 0", cmd.TTL.String())}
	}
	if len(cmd.Roles) == 0 || len(cmd.Roles) > MaxRolesPerToken {
		return Result{Err: fence.Invalid("roles", "1 to 64 roles", itoa(int64(len(cmd.Roles))))}
	}
	for _, r := range cmd.Roles {
		if m.auth.roles[r] == nil {
			return Result{Err: fence.Invalid("role", "an existing role", r)}
		}
	}
	if m.auth.tokens[cmd.Name] != nil {
		return Result{Err: &fence.OpConflictError{Field: "id", ID: cmd.Name}}
	}
	if len(m.auth.tokens) >= MaxAuthTokens {
		return Result{Err: fence.Exhausted("auth tokens", "at most "+utoa(MaxAuthTokens), utoa(len(m.auth.tokens)))}
	}
	roles := slices.Clone(cmd.Roles)
	sort.Strings(roles)
	roles = slices.Compact(roles)
	t := &AuthToken{ID: cmd.Name, Hash: slices.Clone(cmd.Value), Roles: roles, Description: cmd.Owner, CreatedAt: m.clock}
	if cmd.TTL > 0 {
		t.ExpiresAt = m.clock + int64(cmd.TTL)
	}
	m.auth.tokens[cmd.Name] = t
	return Result{}
}

// tokenRevoke applies OpTokenRevoke (Name). A revoked token stays listed
// and its id is never reused.
func (m *impl) tokenRevoke(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	t := m.auth.tokens[cmd.Name]
	if t == nil {
		return Result{Err: fence.Invalid("id", "an existing token", cmd.Name)}
	}
	t.Revoked = true
	return Result{}
}

// roleChange applies OpRoleGrant (creating the role if needed, adding
// Perms) and OpRoleRevoke (removing Perms; with none, removing the role
// unless a live token holds it). The admin role cannot be changed.
func (m *impl) roleChange(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	if m.auth.bootstraps == 0 {
		return Result{Err: fence.Invalid("auth", "bootstrapped first (fence auth bootstrap)", "not bootstrapped")}
	}
	if err := validAuthName("role", cmd.Name); err != nil {
		return Result{Err: err}
	}
	if cmd.Name == AdminRole {
		return Result{Err: fence.Invalid("role", "not "+AdminRole+" (it cannot be changed)", cmd.Name)}
	}
	for _, p := range cmd.Perms {
		if p.Kind < PermLock || p.Kind > PermAdmin {
			return Result{Err: fence.Invalid("permission", "kind lock, read, write or admin", p.String())}
		}
		if len(p.Prefix) > fence.MaxNameBytes {
			return Result{Err: fence.Invalid("permission", "a prefix of at most 512 bytes", itoa(int64(len(p.Prefix)))+" bytes")}
		}
	}
	m.auth.init()
	r := m.auth.roles[cmd.Name]
	if cmd.Op == OpRoleGrant {
		if r == nil {
			if len(m.auth.roles) >= MaxRoles {
				return Result{Err: fence.Exhausted("roles", "at most "+utoa(MaxRoles), utoa(len(m.auth.roles)))}
			}
			r = &Role{Name: cmd.Name}
		}
		perms := append(slices.Clone(r.Perms), cmd.Perms...)
		slices.SortFunc(perms, func(a, b Permission) int {
			switch {
			case a.less(b):
				return -1
			case b.less(a):
				return 1
			}
			return 0
		})
		perms = slices.Compact(perms)
		if len(perms) > MaxPermsPerRole {
			return Result{Err: fence.Exhausted("permissions of a role", "at most "+utoa(MaxPermsPerRole), utoa(len(perms)))}
		}
		r.Perms = perms
		m.auth.roles[cmd.Name] = r
		return Result{}
	}
	if r == nil {
		return Result{Err: fence.Invalid("role", "an existing role", cmd.Name)}
	}
	if len(cmd.Perms) == 0 {
		for _, id := range m.tokenIDs() {
			t := m.auth.tokens[id]
			if !t.Revoked && slices.Contains(t.Roles, cmd.Name) {
				return Result{Err: fence.Invalid("role", "held by no unrevoked token", "held by token "+id)}
			}
		}
		delete(m.auth.roles, cmd.Name)
		return Result{}
	}
	r.Perms = slices.DeleteFunc(slices.Clone(r.Perms), func(p Permission) bool { return slices.Contains(cmd.Perms, p) })
	return Result{}
}

// roleBind applies OpRoleBind: binds (Delta != 0) or unbinds the client
// certificate name Owner to role Name.
func (m *impl) roleBind(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	r := m.auth.roles[cmd.Name]
	switch {
	case r == nil:
		return Result{Err: fence.Invalid("role", "an existing role", cmd.Name)}
	case cmd.Owner == "" || len(cmd.Owner) > fence.MaxNameBytes:
		return Result{Err: fence.Invalid("cert_name", "1 to 512 bytes (a certificate's CN or URI SAN)", itoa(int64(len(cmd.Owner)))+" bytes")}
	}
	certs := slices.Clone(r.Certs)
	i, found := slices.BinarySearch(certs, cmd.Owner)
	switch {
	case cmd.Delta != 0 && !found:
		if len(certs) >= MaxCertsPerRole {
			return Result{Err: fence.Exhausted("certificate names of a role", "at most "+utoa(MaxCertsPerRole), utoa(len(certs)))}
		}
		certs = slices.Insert(certs, i, cmd.Owner)
	case cmd.Delta == 0 && found:
		certs = slices.Delete(certs, i, i+1)
	}
	r.Certs = certs
	return Result{}
}

// roleQuota applies OpRoleQuota: role Name's quotas become Quota (the
// admin role's too: quotas are not permissions).
func (m *impl) roleQuota(cmd Command) Result {
	if err := m.needAdmin(cmd); err != nil {
		return Result{Err: err}
	}
	r := m.auth.roles[cmd.Name]
	if r == nil {
		return Result{Err: fence.Invalid("role", "an existing role", cmd.Name)}
	}
	if err := cmd.Quota.Validate(); err != nil {
		return Result{Err: err}
	}
	r.Quota = cmd.Quota
	return Result{}
}

// CertRoles are the roles bound to certificate name (by name).
func (m *Machine) CertRoles(name string) []Role {
	var out []Role
	for _, n := range m.roleNames() {
		r := m.auth.roles[n]
		if _, ok := slices.BinarySearch(r.Certs, name); ok {
			out = append(out, Role{Name: r.Name, Perms: slices.Clone(r.Perms), Certs: slices.Clone(r.Certs)})
		}
	}
	return out
}

func (m *impl) tokenIDs() []string {
	ids := make([]string, 0, len(m.auth.tokens))
	for id := range m.auth.tokens {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (m *impl) roleNames() []string {
	names := make([]string, 0, len(m.auth.roles))
	for n := range m.auth.roles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// owns refuses cmd unless its principal is owner (or it is an admin's).
func owns(cmd Command, owner, what, name string) error {
	if cmd.Admin || cmd.Principal == owner {
		return nil
	}
	return &fence.PermissionDeniedError{Principal: cmd.Principal, What: what, Name: name}
}

// AuthEnabled reports whether checking is on (OpAuthEnable).
func (m *Machine) AuthEnabled() bool { return m.auth.enabled }

// AuthBootstraps is the number of bootstraps applied (0: never).
func (m *Machine) AuthBootstraps() uint64 { return m.auth.bootstraps }

// AuthToken returns a copy of token id.
func (m *Machine) AuthToken(id string) (AuthToken, bool) {
	t := m.auth.tokens[id]
	if t == nil {
		return AuthToken{}, false
	}
	c := *t
	c.Roles = slices.Clone(t.Roles)
	c.Hash = slices.Clone(t.Hash)
	return c, true
}

// AuthTokens lists the tokens by id (copies, with their hashes cleared).
func (m *Machine) AuthTokens() []AuthToken {
	out := make([]AuthToken, 0, len(m.auth.tokens))
	for _, id := range m.tokenIDs() {
		t, _ := m.AuthToken(id)
		t.Hash = nil
		out = append(out, t)
	}
	return out
}

// Role returns a copy of role name.
func (m *Machine) Role(name string) (Role, bool) {
	r := m.auth.roles[name]
	if r == nil {
		return Role{}, false
	}
	return Role{Name: r.Name, Perms: slices.Clone(r.Perms), Certs: slices.Clone(r.Certs), Quota: r.Quota}, true
}

// Roles lists the roles by name.
func (m *Machine) Roles() []Role {
	out := make([]Role, 0, len(m.auth.roles))
	for _, n := range m.roleNames() {
		r, _ := m.Role(n)
		out = append(out, r)
	}
	return out
}

// TokenMatches reports whether hash is token t's (in constant time).
func (t AuthToken) TokenMatches(hash []byte) bool {
	return len(t.Hash) == authHashBytes && subtle.ConstantTimeCompare(t.Hash, hash) == 1
}

// Allows reports whether perms allow kind on name: a permission of that
// kind whose prefix starts name, or admin (on a prefix of name).
func Allows(perms []Permission, kind PermKind, name string) bool {
	for _, p := range perms {
		if (p.Kind == kind || p.Kind == PermAdmin) && strings.HasPrefix(name, p.Prefix) {
			return true
		}
	}
	return false
}
