package proxy

// handoffError is a descriptor sent to the capture socket that is not a
// socket the proxy serves.
type handoffError struct{ err error }

func (e *handoffError) Error() string { return "the socket handed over: " + e.err.Error() }
