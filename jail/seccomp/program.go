package seccomp

// Program returns the BPF program for rules on this architecture. For the
// default rules it is the program generated at development time and
// embedded in the binary (default_GOARCH.bpf), so jail needs neither cgo
// nor libseccomp at run time and saves compiling on every start; other
// rules, or an architecture without an embedded program, are compiled now.
func Program(rules []Rule) ([]SockFilter, error) {
	if len(embedded) > 0 && Format(rules) == embeddedRules {
		return Unmarshal(embedded)
	}
	return Compile(rules)
}
