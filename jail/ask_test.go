package jail

import (
	"reflect"
	"testing"
)

// TestResolveAskRules: ask lists are unions of every layer, askTimeout is
// the last layer's that sets it, and learning keeps the unknown "allow"
// even over a layer's "ask".
func TestResolveAskRules(t *testing.T) {
	layers := []*Config{
		{Network: NetworkConfig{Ask: []string{"a.example"}}, Command: CommandConfig{Ask: []string{"git push"}}, AskTimeout: 30},
		{Network: NetworkConfig{Ask: []string{"b.example", "a.example"}, Unknown: "ask"}, AskTimeout: 5},
		{Command: CommandConfig{Ask: []string{"npm publish"}}},
	}
	p, err := Resolve(layers, "/p", "/h", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example", "b.example"}; !reflect.DeepEqual(p.Network.Ask, want) {
		t.Errorf("network.ask = %v, want %v", p.Network.Ask, want)
	}
	if want := []string{"git push", "npm publish"}; !reflect.DeepEqual(p.Command.Ask, want) {
		t.Errorf("command.ask = %v, want %v", p.Command.Ask, want)
	}
	if p.AskTimeout != 5 || p.Network.Unknown != "ask" {
		t.Errorf("askTimeout %d, unknown %q; want 5 and ask", p.AskTimeout, p.Network.Unknown)
	}
	p, _ = Resolve(layers, "/p", "/h", Options{Mode: "learning"})
	if p.Network.Unknown != "allow" {
		t.Errorf("learning: unknown %q, want allow", p.Network.Unknown)
	}
}

// TestParseAskKeys: the ask keys parse, "unknown": "ask" included.
func TestParseAskKeys(t *testing.T) {
	c, err := ParseConfig([]byte(`{"network": {"ask": ["*.example.org", "10.0.0.1:22"], "unknown": "ask"}, "command": {"ask": ["git push"]}, "askTimeout": 3600}`), "jail.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.AskTimeout != 3600 || c.Network.Unknown != "ask" || len(c.Network.Ask) != 2 || c.Command.Ask[0] != "git push" {
		t.Errorf("parsed %+v", c)
	}
}
