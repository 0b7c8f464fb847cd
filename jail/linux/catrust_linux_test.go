package linux

import (
	"testing"

	"github.com/jailsh/jail/jail"
)

func TestTrustOpJailCAAloneUnlessSomethingIsNotIntercepted(t *testing.T) {
	f := &Facts{CADir: "/c", SessionDir: "/s"}
	for _, c := range []struct {
		name        string
		pol         jail.Policy
		src, bundle string
	}{
		{"intercepted", jail.Policy{}, "/c/ca.pem", ""},
		{"passthrough", jail.Policy{Network: jail.NetworkConfig{Passthrough: []string{"pinned.example.test"}}}, "/s/ca-bundle.pem", "/s/ca-bundle.pem"},
		{"forward", jail.Policy{Forward: []int{5432}}, "/s/ca-bundle.pem", "/s/ca-bundle.pem"},
	} {
		n := &NetPlan{CADir: f.CADir}
		op := trustOp(&c.pol, f, n)
		if op.Kind != "ro-bind" || op.Src != c.src || op.Dest != CABundlePath || n.Bundle != c.bundle {
			t.Errorf("%s: op %+v, bundle %q; want %s bound, bundle %q", c.name, op, n.Bundle, c.src, c.bundle)
		}
	}
}

func TestHostCAFilePrefersSSLCertFile(t *testing.T) {
	env := map[string]string{"SSL_CERT_FILE": "/etc/custom.pem"}
	if got := hostCAFile(func(k string) string { return env[k] }); got != "/etc/custom.pem" {
		t.Errorf("hostCAFile = %q, want SSL_CERT_FILE's", got)
	}
	got := hostCAFile(func(string) string { return "" })
	if got != "" && !fileExists(got) {
		t.Errorf("hostCAFile without SSL_CERT_FILE = %q, which does not exist", got)
	}
}
