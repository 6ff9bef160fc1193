package engine

import "github.com/hourglass-mq/hourglass/message"

// Peek returns the first max bytes of a message's body (all of it when
// shorter) and the body's full length, whatever the message's state: for
// an operator looking at a message, not for delivery.
func (e *Engine) Peek(id message.ID, max int) ([]byte, int, error) {
	s, err := e.readMessage(id)
	if err != nil {
		return nil, 0, err
	}
	b := s.Body
	if len(b) > max {
		b = b[:max]
	}
	return append([]byte(nil), b...), len(s.Body), nil
}
