package remoting

// sendHalf answers a transactional producer's half message.
func (s *Server) sendHalf(c *conn, h sendHeader, items []batchItem) *Command {
	return errResp(respRequestCodeNotSupp, "transactional messages are not supported by hourglass over the remoting protocol yet")
}

// endTransaction answers END_TRANSACTION.
func (s *Server) endTransaction(req *Command) *Command { return s.unsupported(req) }
