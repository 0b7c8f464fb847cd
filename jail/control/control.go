// Package control is the live control plane of running jails: each jail
// process runs a Hub, which holds the requests and execs that wait for a
// person's answer, counts its decisions, streams them, and serves all of
// it on a control socket that only the same user, outside every jail, may
// use. The jail CLI (jail ps, allow, deny, pending, approve, reject) and
// the dashboard are its clients.
//
// The protocol is one JSON object per line over a unix stream socket: a
// client writes one Call and reads one Reply, except for "watch", which
// streams Events until the client hangs up.
package control

import (
	"time"

	"github.com/jailsh/jail/proxy"
)

// Info describes a running session.
type Info struct {
	ID      string    `json:"id"`
	Command []string  `json:"command"`
	Project string    `json:"project"` // the project root
	Cwd     string    `json:"cwd"`
	Started time.Time `json:"started"`
	PID     int       `json:"pid"` // the jail process, on the host
	Mode    string    `json:"mode,omitempty"`
	Remote  string    `json:"remote,omitempty"` // the host of a --remote run
	// Config is the project's jail.json ("" when it has none); User is
	// the user's config.json. Answers for the project or for the user
	// are written there.
	Config string `json:"config,omitempty"`
	User   string `json:"user,omitempty"`
	Policy Policy `json:"policy"`
}

// Policy is a session's effective policy in short form, for people.
type Policy struct {
	Unknown     string   `json:"unknown"` // "deny", "allow" or "ask"
	Allow       []string `json:"allow,omitempty"`
	Deny        []string `json:"deny,omitempty"`
	Ask         []string `json:"ask,omitempty"`
	CommandDeny []string `json:"commandDeny,omitempty"`
	CommandAsk  []string `json:"commandAsk,omitempty"`
	Writable    []string `json:"writable,omitempty"`
	Masked      int      `json:"masked"` // how many paths are masked
	NoNetwork   bool     `json:"noNetwork,omitempty"`
	AskTimeout  float64  `json:"askTimeoutSeconds"`
}

// Counts are a session's decisions so far.
type Counts struct {
	Allowed int64 `json:"allowed"`
	Denied  int64 `json:"denied"`
	Pending int   `json:"pending"`
}

// Status is a session's Info and Counts, and the rules added to it live.
type Status struct {
	Info
	Counts Counts   `json:"counts"`
	Added  []string `json:"added,omitempty"` // "allow HOST", "deny HOST"
}

// Kinds of held requests.
const (
	KindNetwork = "network"
	KindCommand = "command"
)

// Request is something held until a person answers: a connection
// (KindNetwork: Host, Port, Scheme) or an exec (KindCommand: Argv, Cwd,
// Path).
type Request struct {
	ID      string `json:"id"` // unique among the user's sessions
	Session string `json:"session"`
	Kind    string `json:"kind"`
	// Rule is the rule that asked: "ask *.example.org", "unknown=ask",
	// "command.ask git push".
	Rule   string   `json:"rule"`
	Host   string   `json:"host,omitempty"`
	Port   int      `json:"port,omitempty"`
	Scheme string   `json:"scheme,omitempty"`
	Argv   []string `json:"argv,omitempty"`
	Cwd    string   `json:"cwd,omitempty"`
	Path   string   `json:"path,omitempty"` // the program, as seen in the jail
	PID    int      `json:"pid,omitempty"`
	// Waiting counts the connections or execs this one request holds
	// (the same host and port asked again while held waits on it).
	Waiting  int       `json:"waiting"`
	Held     time.Time `json:"held"`
	Deadline time.Time `json:"deadline"`
}

// Scopes of an answer.
const (
	ScopeOnce    = "once"    // this request only
	ScopeSession = "session" // the rest of this session
	ScopeProject = "project" // written into the project's jail.json
	ScopeUser    = "user"    // written into the user's config.json
)

// Answer is a person's answer to a Request, or what came instead: a
// timeout or the session's end (By says which).
type Answer struct {
	Allow bool   `json:"allow"`
	Scope string `json:"scope"`
	// By is who answered: "jail approve", "dashboard", "timeout", "ended".
	By string `json:"by,omitempty"`
}

// Activity is one file or exec event of a --watch session.
type Activity struct {
	Time  time.Time `json:"time"`
	Kind  string    `json:"kind"` // "open", "create", "exec", ...
	Path  string    `json:"path,omitempty"`
	Addr  string    `json:"addr,omitempty"`
	Write bool      `json:"write,omitempty"`
	Errno int       `json:"errno,omitempty"`
	PID   int       `json:"pid,omitempty"`
}

// Event types streamed by "watch".
const (
	EventHello    = "hello"    // the session's Status, first
	EventDecision = "decision" // Decision: one decision-log entry
	EventHeld     = "held"     // Request: a new held request
	EventAnswered = "answered" // Request and Answer
	EventRule     = "rule"     // Rule: a rule added live ("allow HOST")
	EventActivity = "activity" // Activity of a --watch session
	EventEnded    = "ended"    // the session ended
)

// Event is one line of a "watch" stream.
type Event struct {
	Type     string       `json:"type"`
	Session  string       `json:"session"`
	Status   *Status      `json:"status,omitempty"`
	Decision *proxy.Entry `json:"decision,omitempty"`
	Request  *Request     `json:"request,omitempty"`
	Answer   *Answer      `json:"answer,omitempty"`
	Rule     string       `json:"rule,omitempty"`
	Activity *Activity    `json:"activity,omitempty"`
}

// Operations of a Call.
const (
	OpStatus  = "status"  // Reply.Status
	OpPending = "pending" // Reply.Pending
	OpAnswer  = "answer"  // ID, Answer
	OpRule    = "rule"    // Allow, Host, Scope: a live rule, and persisted for ScopeProject and ScopeUser
	OpWatch   = "watch"   // a stream of Events
)

// Call is one request on a control socket.
type Call struct {
	Op     string  `json:"op"`
	ID     string  `json:"id,omitempty"`
	Answer *Answer `json:"answer,omitempty"`
	Allow  bool    `json:"allow,omitempty"`
	Host   string  `json:"host,omitempty"`
	Scope  string  `json:"scope,omitempty"`
}

// Reply answers a Call; Error is "" on success.
type Reply struct {
	Error   string    `json:"error,omitempty"`
	Status  *Status   `json:"status,omitempty"`
	Pending []Request `json:"pending,omitempty"`
}

// Rules is what a Hub changes in its session when a person widens or
// narrows it: Live adds a rule to the running proxy, Persist writes it
// into a config file (scope ScopeProject or ScopeUser). Either may be nil
// (the session has no proxy, or nothing may be written); a Hub then
// refuses what needs it.
type Rules struct {
	Live    func(allow bool, host string) error
	Persist func(scope string, allow bool, host string) error
}

// HubConfig is what NewHub needs.
type HubConfig struct {
	Info Info
	// Timeout is how long a request is held without an answer before it
	// is denied; 0 takes DefaultTimeout.
	Timeout time.Duration
	// MaxPending caps the requests held at once; past it a new one is
	// denied at once. 0 takes DefaultMaxPending.
	MaxPending int
	Rules      Rules
	// Log is not written by the Hub: the proxy and the exec supervisor,
	// which hold the connection or the exec, record the held entry and
	// the answer's. It is kept for callers that hand it over anyway.
	Log *proxy.Log
}

// Defaults of HubConfig.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxPending = 64
)
