package store

// SetMaxBatchDocument lowers the size at which a batch's rounds are
// split into several statements on SQLite, so a test need not write
// 32 MB.
func SetMaxBatchDocument(n int) (restore func()) {
	old := maxBatchDocument
	maxBatchDocument = n
	return func() { maxBatchDocument = old }
}

// BatchStatements is how many statements fill a batch's table on
// SQLite.
func BatchStatements(writes []RoundWrite) (int, error) {
	recs := make([][]byte, len(writes))
	for i := range writes {
		recs[i] = EncodeRound(nil, &writes[i])
	}
	stmts := 0
	for start := 0; start < len(recs); stmts++ {
		_, n, err := sqliteRows(nil, recs[start:], start, maxBatchDocument)
		if err != nil {
			return 0, err
		}
		start += n
	}
	return stmts, nil
}
