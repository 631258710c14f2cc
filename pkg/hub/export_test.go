package hub

// StopControllers stops the running controller manager, as a failure
// would; the server starts a new one after its backoff.
func (s *Server) StopControllers() { s.controllers.stopManager() }
