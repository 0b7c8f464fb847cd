package proxy

import (
	"context"
	"errors"
)

// Question is a connection held for a person's answer: Rules.Decide said
// "ask" for it (an entry of Rules.Ask, or Unknown "ask").
type Question struct {
	Host   string // normalized
	Port   int
	Scheme string // "http", "https", "tcp", "socks5"
	Method string
	Client string
	Rule   string // "ask *.example.org", "unknown=ask"
}

// Verdict is the answer to a Question.
type Verdict struct {
	Allow bool
	// Rule is what the log records as the deciding rule: "ask once",
	// "ask session", "ask timeout", ...
	Rule   string
	Reason string
}

// AddRule adds an Allow (allow) or Deny entry to the running Server's
// rules, validated like the configured ones; the connections decided
// after it see it.
func (s *Server) AddRule(allow bool, entry string) error {
	return errors.New("proxy: live rules are not implemented")
}

var _ = context.Background
