package seccomp

// Program returns the BPF program for rules on this architecture. For the
// default rules it is the program generated at development time and
// embedded in the binary (default_GOARCH.bpf), so jail needs neither cgo
// nor libseccomp at run time and saves compiling on every start; other
// rules, or an architecture without an embedded program, are compiled now.
// The program comes in the form init loads (see Marshal).
func Program(rules []Rule) ([]byte, error) {
	if len(embedded) > 0 && Format(rules) == embeddedRules {
		return embedded, nil
	}
	prog, err := Compile(rules)
	if err != nil {
		return nil, err
	}
	return Marshal(prog), nil
}
