package endpoint

// ParseEventID is parseEventID, for the external tests.
var ParseEventID = parseEventID

// SetCallKeptEvents bounds the events a call's stream keeps, until
// restore.
func SetCallKeptEvents(n int64) (restore func()) {
	old := callKeptEvents
	callKeptEvents = n
	return func() { callKeptEvents = old }
}
