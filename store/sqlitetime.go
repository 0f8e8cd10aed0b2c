package store

import (
	"context"
	"database/sql/driver"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// The SQLite driver reads a time column by parsing its text in one
// layout (SQLiteTime), into the machine's zone when its offset matches
// and a nameless one otherwise, and hands anything else back as text.
// The driver before it read every time in UTC, and any of the layouts
// below: a row written by hand (SQLite's own datetime('now')), or by
// tools that write RFC 3339, read as a time. utcConnector keeps that:
// its rows give every time in UTC, and the text of a column declared a
// time as the time it spells, when it spells one. Writes are the
// driver's own, in SQLiteTime.
type utcConnector struct{ driver.Connector }

// timeLayouts are the spellings of a time a column may hold, parsed in
// UTC when they name no zone.
var timeLayouts = [...]string{
	"2006-01-02 15:04:05.999999999Z07:00", // SQLiteTime's, and with Z
	"2006-01-02T15:04:05.999999999Z07:00", // RFC 3339
	"2006-01-02 15:04:05.999999999",       // datetime('now')
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999 -0700 MST", // time.Time's String
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

func (c utcConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	in, ok := dc.(driverConn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("sqlite driver: connection %T lacks a method the store uses", dc)
	}
	return utcConn{in}, nil
}

// driverConn is what the store uses of the driver's connections: database/sql
// calls each of these when a connection has it.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.NamedValueChecker
}

type utcConn struct{ driverConn }

func (c utcConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c utcConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.driverConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	in, ok := s.(driverStmt)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("sqlite driver: statement %T lacks a method the store uses", s)
	}
	return utcStmt{in}, nil
}

// driverStmt is what the store uses of the driver's statements.
type driverStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
	driver.NamedValueChecker
}

type utcStmt struct{ driverStmt }

func (s utcStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.driverStmt.QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	return &utcRows{Rows: r}, nil
}

type utcRows struct {
	driver.Rows
	// timeCols says which columns are declared a time, once asked.
	timeCols []bool
}

func (r *utcRows) Next(dest []driver.Value) error {
	if err := r.Rows.Next(dest); err != nil {
		return err
	}
	for i, v := range dest {
		switch v := v.(type) {
		case time.Time:
			dest[i] = v.UTC()
		case string:
			if r.isTime(i) {
				if t, ok := parseTime(v); ok {
					dest[i] = t
				}
			}
		}
	}
	return nil
}

// isTime reports whether column i is declared a date or a time.
func (r *utcRows) isTime(i int) bool {
	if r.timeCols == nil {
		r.timeCols = make([]bool, len(r.Columns()))
		if types, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
			for j := range r.timeCols {
				switch strings.ToUpper(types.ColumnTypeDatabaseTypeName(j)) {
				case "DATE", "DATETIME", "TIMESTAMP":
					r.timeCols[j] = true
				}
			}
		}
	}
	return i < len(r.timeCols) && r.timeCols[i]
}

// parseTime reads s in the first of timeLayouts it fits, in UTC.
func parseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// The column types database/sql and GORM may ask a row about.

func (r *utcRows) ColumnTypeDatabaseTypeName(i int) string {
	if in, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return in.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *utcRows) ColumnTypeScanType(i int) reflect.Type {
	if in, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return in.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *utcRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if in, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return in.ColumnTypeNullable(i)
	}
	return false, false
}
