package remoting

// viewMessage answers VIEW_MESSAGE_BY_ID.
func (s *Server) viewMessage(req *Command) *Command { return s.unsupported(req) }

// queryMessage answers QUERY_MESSAGE.
func (s *Server) queryMessage(req *Command) *Command { return s.unsupported(req) }
