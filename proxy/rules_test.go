package proxy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	rules := Rules{
		Allow: []string{"allowed.test", "*.wild.test", "ported.test:8443", "10.1.2.3", "127.0.0.1:9000", "[::1]:9001", "*.evil.test", "127.1"},
		Deny:  []string{"bad.wild.test", "*.evil.test", "ported.test:9999"},
	}
	open := rules
	open.Unknown = "allow"

	tests := []struct {
		name  string
		rules Rules
		host  string
		port  int
		allow bool
		rule  string // "" means: do not check
		// reason is a substring of Decision.Reason, for denials.
		reason string
	}{
		{"exact", rules, "allowed.test", 443, true, "allow allowed.test", ""},
		{"exact any port", rules, "allowed.test", 22, true, "allow allowed.test", ""},
		{"upper case", rules, "ALLOWED.Test", 443, true, "allow allowed.test", ""},
		{"trailing dot", rules, "allowed.test.", 443, true, "allow allowed.test", ""},
		{"subdomain of exact", rules, "api.allowed.test", 443, false, "unknown=deny", "not in network.allow"},
		{"suffix trick", rules, "allowed.test.evil.test", 443, false, "deny *.evil.test", ""},
		{"prefix trick", rules, "evilallowed.test", 443, false, "unknown=deny", ""},
		{"userinfo", rules, "allowed.test@evil.test", 443, false, "", "invalid host"},
		{"userinfo reversed", rules, "evil.test@allowed.test", 443, false, "", "invalid host"},
		{"space", rules, "allowed.test ", 443, false, "", "invalid host"},
		{"slash", rules, "allowed.test/x", 443, false, "", "invalid host"},
		{"port in host", rules, "allowed.test:443", 443, false, "", "invalid host"},
		{"empty", rules, "", 443, false, "", "invalid host"},
		{"dot only", rules, ".", 443, false, "", "invalid host"},
		{"empty label", rules, "a..allowed.test", 443, false, "", "invalid host"},
		{"bad port", rules, "allowed.test", 0, false, "", "invalid host"},
		{"port too big", rules, "allowed.test", 65536, false, "", "invalid host"},
		{"wildcard subdomain", rules, "a.wild.test", 443, true, "allow *.wild.test", ""},
		{"wildcard deep", rules, "a.b.wild.test", 443, true, "allow *.wild.test", ""},
		{"wildcard apex", rules, "wild.test", 443, false, "unknown=deny", ""},
		{"wildcard boundary", rules, "notwild.test", 443, false, "unknown=deny", ""},
		{"deny beats allow", rules, "bad.wild.test", 443, false, "deny bad.wild.test", "network.deny"},
		{"deny wildcard beats allow wildcard", rules, "x.evil.test", 443, false, "deny *.evil.test", ""},
		{"port entry matches", rules, "ported.test", 8443, true, "allow ported.test:8443", ""},
		{"port entry other port", rules, "ported.test", 443, false, "unknown=deny", ""},
		{"deny port", open, "ported.test", 9999, false, "deny ported.test:9999", ""},
		{"unknown deny", rules, "other.test", 443, false, "unknown=deny", "not in network.allow"},
		{"unknown allow", open, "other.test", 443, true, "unknown=allow", ""},
		{"unknown allow still denies", open, "bad.wild.test", 443, false, "deny bad.wild.test", ""},
		{"ip literal", rules, "1.1.1.1", 443, false, "unknown=deny", "ip literal"},
		{"ip literal unknown allow", open, "1.1.1.1", 443, false, "unknown=allow", "ip literal"},
		{"ip literal v6", open, "2606:4700::1111", 443, false, "", "ip literal"},
		{"ip literal bracketed", open, "[2606:4700::1111]", 443, false, "", "ip literal"},
		{"ip literal zone", open, "fe80::1%eth0", 443, false, "", "invalid host"},
		{"ip numeric short", open, "127.0.1", 80, false, "", "ip literal"},
		{"ip numeric decimal", open, "2130706433", 80, false, "", "ip literal"},
		{"ip numeric hex", open, "0x7f.0.0.1", 80, false, "", "ip literal"},
		{"ip numeric hex whole", open, "0x7f000001", 80, false, "", "ip literal"},
		{"ip numeric octal", open, "0177.0.0.1", 80, false, "", "ip literal"},
		{"localhost is a name", open, "localhost", 80, true, "unknown=allow", ""},
		{"ip rule", rules, "10.1.2.3", 443, true, "allow 10.1.2.3", ""},
		{"ip rule with port", rules, "127.0.0.1", 9000, true, "allow 127.0.0.1:9000", ""},
		{"ip rule other port", rules, "127.0.0.1", 9002, false, "", "ip literal"},
		{"ip rule mapped v6", rules, "::ffff:10.1.2.3", 443, true, "allow 10.1.2.3", ""},
		{"ip6 rule", rules, "::1", 9001, true, "allow [::1]:9001", ""},
		{"ip6 rule bracketed", rules, "[::1]", 9001, true, "allow [::1]:9001", ""},
		{"wildcard never matches ip", Rules{Allow: []string{"*.0.0.1"}}, "127.0.0.1", 80, false, "", "ip literal"},
		{"numeric name named by rule", rules, "127.1", 80, true, "allow 127.1", ""},
		{"underscore", open, "_srv.example.test", 443, true, "unknown=allow", ""},
		{"unicode", open, "bücher.test", 443, false, "", "invalid host"},
		{"percent", open, "a%2e.test", 443, false, "", "invalid host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.rules.Decide(tt.host, tt.port)
			if d.Allow != tt.allow {
				t.Fatalf("Decide(%q, %d) = %+v, want allow=%v", tt.host, tt.port, d, tt.allow)
			}
			if tt.rule != "" && d.Rule != tt.rule {
				t.Errorf("Decide(%q, %d).Rule = %q, want %q", tt.host, tt.port, d.Rule, tt.rule)
			}
			if !tt.allow && !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("Decide(%q, %d).Reason = %q, want it to contain %q", tt.host, tt.port, d.Reason, tt.reason)
			}
			if !tt.allow && d.Reason == "" {
				t.Errorf("Decide(%q, %d) denies without a reason", tt.host, tt.port)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		rules Rules
		err   string // substring; "" means valid
	}{
		{"good", Rules{Allow: []string{"a.test", "*.b.test", "c.test:8443", "10.0.0.1", "[::1]:80", "::1"}, Unknown: "deny",
			Hosts: map[string]string{"a.test": "127.0.0.1:8080", "b.test": "[::1]:80"}}, ""},
		{"star", Rules{Allow: []string{"*"}}, `network.unknown to "allow"`},
		{"inner star", Rules{Allow: []string{"a.*.test"}}, "leading"},
		{"star dot", Rules{Deny: []string{"*."}}, "network.deny"},
		{"bad port", Rules{Allow: []string{"a.test:http"}}, "bad port"},
		{"port zero", Rules{Allow: []string{"a.test:0"}}, "bad port"},
		{"userinfo", Rules{Allow: []string{"user@a.test"}}, "not a host"},
		{"bad passthrough", Rules{Passthrough: []string{"a b"}}, "network.passthrough"},
		{"bad unknown", Rules{Unknown: "maybe"}, "network.unknown"},
		{"hosts without port", Rules{Hosts: map[string]string{"a.test": "127.0.0.1"}}, "ip:port"},
		{"hosts name", Rules{Hosts: map[string]string{"a.test": "localhost:80"}}, "ip:port"},
		{"hosts ip key", Rules{Hosts: map[string]string{"10.0.0.1": "127.0.0.1:80"}}, "not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rules.Validate()
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

func TestAddrClass(t *testing.T) {
	tests := map[string]string{
		"0.0.0.0":            "unspecified",
		"10.0.0.1":           "private",
		"100.64.0.1":         "CGNAT",
		"127.0.0.1":          "loopback",
		"127.255.255.254":    "loopback",
		"169.254.169.254":    "link-local",
		"172.16.0.1":         "private",
		"172.31.255.255":     "private",
		"192.168.1.1":        "private",
		"224.0.0.1":          "multicast",
		"255.255.255.255":    "reserved",
		"::":                 "unspecified",
		"::1":                "loopback",
		"fd00::1":            "private",
		"fe80::1":            "link-local",
		"ff02::1":            "multicast",
		"::ffff:127.0.0.1":   "loopback",
		"64:ff9b::a9fe:a9fe": "link-local",
		"2002:7f00:1::":      "loopback",
		"1.1.1.1":            "",
		"172.32.0.1":         "",
		"100.128.0.1":        "",
		"2606:4700::1111":    "",
	}
	for ip, want := range tests {
		if got := addrClass(netip.MustParseAddr(ip)); got != want {
			t.Errorf("addrClass(%s) = %q, want %q", ip, got, want)
		}
	}
}
