package demo

import "time"

// SetMigrationStep makes migrate's steps take d, so a test need not wait
// twenty seconds.
func SetMigrationStep(d time.Duration) (restore func()) {
	old := migrationStep
	migrationStep = d
	return func() { migrationStep = old }
}
