package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/fenceworks/fence"
	"github.com/go-sql-driver/mysql"
)

// ParseDSN reads the connection string an operator gives `fence guard
// max-token --mysql` or `fence restore --floor-from`, in either form:
//
//	mysql://user:password@host:port/database?table=T&param=value   (also mariadb://; port 3306 if left out)
//	user:password@tcp(host:port)/database?table=T&param=value        (go-sql-driver/mysql's own DSN)
//
// It returns the driver's configuration and the guard table named by the
// table parameter ("" if none), which is taken out of the parameters (the
// driver would send it to the server as a session variable). Other
// parameters are the driver's (timeout=5s, tls=true, …). A string that is
// neither form is refused with *fence.InvalidError on field "dsn", without
// repeating the password.
func ParseDSN(s string) (cfg *mysql.Config, table string, err error) {
	const bound = "a mysql:// URL (mysql://user:password@host:3306/database) or a driver DSN (user:password@tcp(host:3306)/database)"
	if strings.HasPrefix(s, "mysql://") || strings.HasPrefix(s, "mariadb://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || u.Opaque != "" {
			return nil, "", fence.Invalid("dsn", bound, redact(s))
		}
		addr := u.Host
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(strings.Trim(addr, "[]"), "3306")
		}
		params, table := takeTable(u.RawQuery)
		dsn := "tcp(" + addr + ")/" + strings.TrimPrefix(u.Path, "/")
		if params != "" {
			dsn += "?" + params
		}
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, "", fence.Invalid("dsn", bound+": "+err.Error(), redact(s))
		}
		if u.User != nil {
			cfg.User = u.User.Username()
			cfg.Passwd, _ = u.User.Password()
		}
		return cfg, table, nil
	}
	if strings.Contains(s, "://") {
		return nil, "", fence.Invalid("dsn", bound, redact(s))
	}
	cfg, err = mysql.ParseDSN(s)
	if err != nil {
		return nil, "", fence.Invalid("dsn", bound+": "+err.Error(), redact(s))
	}
	table = cfg.Params["table"]
	delete(cfg.Params, "table")
	return cfg, table, nil
}

// takeTable removes the table parameter from a raw query string.
func takeTable(raw string) (rest, table string) {
	var keep []string
	for kv := range strings.SplitSeq(raw, "&") {
		if k, v, _ := strings.Cut(kv, "="); k == "table" {
			table, _ = url.QueryUnescape(v)
			continue
		}
		if kv != "" {
			keep = append(keep, kv)
		}
	}
	return strings.Join(keep, "&"), table
}

// redact hides the password of a DSN for an error message.
func redact(s string) string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return fmt.Sprintf("%q", s)
	}
	head := s[:at]
	scheme := ""
	if i := strings.Index(head, "://"); i >= 0 {
		scheme, head = head[:i+3], head[i+3:]
	}
	if user, _, ok := strings.Cut(head, ":"); ok {
		head = user + ":xxxxx"
	}
	return fmt.Sprintf("%q", scheme+head+s[at:])
}

// MaxTokenAt connects to the database dsn names (either form of ParseDSN),
// reads the largest token of the guard table — table if not empty, else the
// DSN's table parameter, else fence_guard — and closes the connection. found
// is false when the table exists and has no row; where names the table as
// read ("database.table") for messages such as "no tokens found in
// test.fence_guard: wrong table?". This is what `fence guard max-token
// --mysql DSN` and `fence restore --floor-from mysql://…` call. A table
// given both ways, differently, is refused with *fence.InvalidError.
func MaxTokenAt(ctx context.Context, dsn, table string) (max fence.Token, found bool, where string, err error) {
	cfg, dsnTable, err := ParseDSN(dsn)
	if err != nil {
		return 0, false, "", err
	}
	switch {
	case table == "":
		table = dsnTable
	case dsnTable != "" && dsnTable != table:
		return 0, false, "", fence.Invalid("table", "the same in --table and the DSN's table=", fmt.Sprintf("%q and %q", table, dsnTable))
	}
	g, err := New(Options{Table: table})
	if err != nil {
		return 0, false, "", err
	}
	where = g.TableName()
	if len(g.e.Tables().Table) == 1 && cfg.DBName != "" {
		where = cfg.DBName + "." + where
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return 0, false, where, fmt.Errorf("guard/mysql: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	max, found, err = g.MaxTokenFound(ctx, db)
	return max, found, where, err
}
