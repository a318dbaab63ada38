package main

import (
	"context"
	"database/sql"
	"net/url"
	"strings"

	"github.com/fenceworks/fence"
	mysqlguard "github.com/fenceworks/fence/guard/mysql"
)

// The MySQL/MariaDB guard store (guard/mysql): `fence guard max-token
// --mysql DSN` and `fence restore --floor-from mysql://…` (or mariadb://).
func init() {
	extraMaxToken["mysql"] = func(ctx context.Context, conn, table string) (fence.Token, error) {
		max, _, _, err := mysqlguard.MaxTokenAt(ctx, conn, table)
		return max, err // found=false is max 0: maxToken's nothing-found error
	}
	for _, scheme := range []string{"mysql", "mariadb"} {
		extraFloorSchemes[scheme] = func(dsn, table string) (guardStore, error) { return mysqlStore(dsn, table, true) }
	}
}

// mysqlStore reads a MySQL DSN in either form (mysql://user:pw@host:port/db
// or the driver's user:pw@tcp(host:port)/db), ?table= included. table is
// --table: for --floor-from it is the default of a DSN without ?table=
// (dsnWins); for guard max-token a different ?table= is refused.
func mysqlStore(dsn, table string, dsnWins bool) (guardStore, error) {
	cfg, t, err := mysqlguard.ParseDSN(dsn)
	if err != nil {
		return guardStore{}, err
	}
	switch {
	case t == "":
	case table == "" || dsnWins:
		table = t
	case t != table:
		return guardStore{}, fence.Invalid("table", "the same in --table and the DSN's table=", table+" and "+t)
	}
	if _, err := mysqlguard.New(mysqlguard.Options{Table: table}); err != nil {
		return guardStore{}, err
	}
	s := guardStore{kind: "mysql", conn: cfg.FormatDSN(), table: table}
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			s.shown = u.Redacted()
		}
	} else {
		shown := *cfg
		if shown.Passwd != "" {
			shown.Passwd = "xxxxx"
		}
		s.shown = shown.FormatDSN()
	}
	return s, nil
}

// mysqlRepairer repairs a MySQL/MariaDB guard table (fence guard repair --mysql).
type mysqlRepairer struct {
	g  *mysqlguard.Guard
	db *sql.DB
}

func init() {
	extraRepair["mysql"] = func(ctx context.Context, conn, table string) (repairer, error) {
		g, err := mysqlguard.New(mysqlguard.Options{Table: table})
		if err != nil {
			return nil, err
		}
		db, err := sql.Open("mysql", conn)
		if err != nil {
			return nil, err
		}
		return mysqlRepairer{g, db}, nil
	}
}

func (r mysqlRepairer) above(ctx context.Context, resource, prefix string, ceiling fence.Token) ([]storedToken, error) {
	rows, err := r.g.Above(ctx, r.db, resource, prefix, ceiling)
	out := make([]storedToken, len(rows))
	for i, s := range rows {
		out[i] = storedToken(s)
	}
	return out, err
}

func (r mysqlRepairer) lower(ctx context.Context, s storedToken, ceiling fence.Token) (bool, error) {
	return r.g.Lower(ctx, r.db, mysqlguard.Stored(s), ceiling)
}

func (r mysqlRepairer) close() { r.db.Close() }
