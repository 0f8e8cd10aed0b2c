package telemetry

import (
	"errors"
	"strings"

	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// GormPlugin traces database calls made inside a request as CLIENT spans
// named "{operation} {table}", with db.system.name, db.operation.name and
// db.collection.name. Query text and bound values are not recorded.
// Calls outside any request (the catalogue poll, migrations) are not
// traced, or every poll would be a trace. Register it once per *gorm.DB:
//
//	st.DB().Use(telemetry.GormPlugin())
func GormPlugin() gorm.Plugin { return gormPlugin{} }

type gormPlugin struct{}

const gormSpanKey = "opsmcp:telemetry:span"

func (gormPlugin) Name() string { return "opsmcp:telemetry" }

func (gormPlugin) Initialize(db *gorm.DB) error {
	cb := db.Callback()
	register := []struct {
		name   string
		op     string
		before func(name string, fn func(*gorm.DB)) error
		after  func(name string, fn func(*gorm.DB)) error
	}{
		{"create", "INSERT", cb.Create().Before("gorm:create").Register, cb.Create().After("gorm:create").Register},
		{"query", "SELECT", cb.Query().Before("gorm:query").Register, cb.Query().After("gorm:query").Register},
		{"update", "UPDATE", cb.Update().Before("gorm:update").Register, cb.Update().After("gorm:update").Register},
		{"delete", "DELETE", cb.Delete().Before("gorm:delete").Register, cb.Delete().After("gorm:delete").Register},
		{"row", "", cb.Row().Before("gorm:row").Register, cb.Row().After("gorm:row").Register},
		{"raw", "", cb.Raw().Before("gorm:raw").Register, cb.Raw().After("gorm:raw").Register},
	}
	system := dbSystem(db)
	for _, r := range register {
		if err := r.before("opsmcp:telemetry:before_"+r.name, gormBefore(system)); err != nil {
			return err
		}
		if err := r.after("opsmcp:telemetry:after_"+r.name, gormAfter(r.op)); err != nil {
			return err
		}
	}
	return nil
}

func dbSystem(db *gorm.DB) string {
	if db.Dialector == nil {
		return "other_sql"
	}
	switch n := db.Dialector.Name(); n {
	case "postgres":
		return "postgresql"
	case "sqlite", "sqlite3":
		return "sqlite"
	default:
		return n
	}
}

func gormBefore(system string) func(*gorm.DB) {
	return func(db *gorm.DB) {
		ctx := db.Statement.Context
		if ctx == nil {
			return
		}
		ctx, span := start(ctx, "db", trace.SpanKindClient, nil, false)
		if !span.IsRecording() {
			return
		}
		span.SetAttributes(AttrDBSystem.String(system))
		db.Statement.Context = ctx
		db.InstanceSet(gormSpanKey, span)
	}
}

func gormAfter(fixedOp string) func(*gorm.DB) {
	return func(db *gorm.DB) {
		op := fixedOp
		v, ok := db.InstanceGet(gormSpanKey)
		if !ok {
			return
		}
		span, ok := v.(trace.Span)
		if !ok {
			return
		}
		if op == "" {
			op = firstWord(db.Statement.SQL.String())
		}
		table := db.Statement.Table
		name := op
		if table != "" {
			name += " " + table
			span.SetAttributes(AttrDBCollection.String(table))
		}
		if op != "" {
			span.SetAttributes(AttrDBOperation.String(op), AttrDBSummary.String(name))
			span.SetName(name)
		}
		err := db.Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			End(span, err, "db_error")
			return
		}
		span.End()
	}
}

func firstWord(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexAny(sql, " \t\n("); i > 0 {
		sql = sql[:i]
	}
	if len(sql) > 16 {
		return ""
	}
	return strings.ToUpper(sql)
}
