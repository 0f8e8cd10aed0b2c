package store

// SetMaxRoundsDocument lowers the size at which a batch's rounds are
// split into several statements, so a test need not write 32 MB.
func SetMaxRoundsDocument(n int) (restore func()) {
	old := maxRoundsDocument
	maxRoundsDocument = n
	return func() { maxRoundsDocument = old }
}

// RoundStatements is how many flow_rounds statements a batch is written
// in on SQLite.
func RoundStatements(writes []RoundWrite) int {
	rows, _ := roundsRows(nil, mergeWrites(writes))
	return len(roundStatements(rows, maxRoundsDocument))
}
