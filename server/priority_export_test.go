package server

// LowPriorityRuns is how many functions the search threads have run, for the tests of
// package server_test.
func LowPriorityRuns() uint64 { return searchThreads().ran.Load() }
