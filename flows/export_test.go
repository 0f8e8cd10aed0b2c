package flows

// BenchRounds are a two-round flow's rounds as the serving path hands
// them to the recorder.
var BenchRounds = benchRounds

// Queued is how many rounds wait in the recorder's queue.
func (r *Recorder) Queued() int { return len(r.queue) }
