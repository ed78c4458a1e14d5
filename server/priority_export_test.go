package server

// LowPriorityRuns is how many functions the server's search threads have run (0 without
// them), for the tests of package server_test.
func (s *Server) LowPriorityRuns() uint64 {
	if s.lowPriority == nil {
		return 0
	}
	return s.lowPriority.ran.Load()
}
