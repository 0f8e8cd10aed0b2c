package sqldb

import (
	"fmt"

	"gorm.io/gorm"
)

// A Sequence numbers the changes written to one table in commit order
// across every writer of the fleet, so a reader that has seen number n
// has seen every change before it and can resume after n. On PostgreSQL
// the writers serialise on a transaction-scoped advisory lock, taken
// last in the transaction so it is held only until the commit; SQLite
// has one writer. Numbers are the table's largest plus one: no gaps,
// unless rows are deleted.
type Sequence struct {
	// Lock is the advisory lock's key, one per sequence.
	Lock int64
	// LastQuery reads the newest number (0 for none).
	LastQuery string
}

// NewSequence is the sequence of column col of table.
func NewSequence(lock int64, table, col string) Sequence {
	return Sequence{Lock: lock, LastQuery: fmt.Sprintf("SELECT COALESCE(MAX(%s), 0) FROM %s", col, table)}
}

// lockQuery takes the numbering lock on PostgreSQL.
const lockQuery = "SELECT pg_advisory_xact_lock(?)"

// Next takes the numbering lock in tx and returns the next number.
func (q Sequence) Next(tx *gorm.DB, d Dialect) (int64, error) {
	if d == Postgres {
		if err := tx.Exec(lockQuery, q.Lock).Error; err != nil {
			return 0, fmt.Errorf("lock sequence: %w", err)
		}
	}
	var last int64
	if err := tx.Raw(q.LastQuery).Scan(&last).Error; err != nil {
		return 0, fmt.Errorf("read sequence: %w", err)
	}
	return last + 1, nil
}
