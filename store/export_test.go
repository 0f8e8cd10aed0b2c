package store

// SetMaxRoundsDocument lowers the size at which a batch's rounds are
// split into several statements, so a test need not write 32 MB.
func SetMaxRoundsDocument(n int) (restore func()) {
	old := maxRoundsDocument
	maxRoundsDocument = n
	return func() { maxRoundsDocument = old }
}

// RoundDocuments is the flow_rounds documents a batch is written as.
func RoundDocuments(writes []RoundWrite) []string {
	return roundRows(mergeWrites(writes), maxRoundsDocument)
}
