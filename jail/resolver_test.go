package jail

import (
	"testing"

	"github.com/jailsh/jail/jail/linux/inside"
	"github.com/jailsh/jail/proxy"
)

// TestSyntheticPrefixAgrees: init routes and captures the IPv6 prefix the
// proxy's resolver gives addresses from; if they differed, every AAAA
// answer would lead nowhere.
func TestSyntheticPrefixAgrees(t *testing.T) {
	if inside.SyntheticNet6 != proxy.SyntheticNet6 {
		t.Fatalf("init captures %v, the resolver answers from %v", inside.SyntheticNet6, proxy.SyntheticNet6)
	}
}
