package inside

import (
	"reflect"
	"testing"
)

func TestInitSpecRoundTrip(t *testing.T) {
	in := InitSpec{
		Argv: []string{"sh", "-c", "echo 'é' \x00"}, Env: []string{"A=1", "B="}, Dir: "/p",
		LandlockV: 7, Landlock: []LandlockRule{{Path: "/usr", Access: "read"}, {Path: "/dev/tty", Access: "tty", File: true}},
		Seccomp: []byte{1, 2, 0, 4}, Ignore: []int{1, 3}, Relays: []Relay{{Listen: "tcp:127.0.0.1:3128", Dial: "unix:/x", HandOff: true}, {Listen: "udp:127.0.0.1:3053", Dial: "unix:/y"}}, Capture: Relay{Listen: "tcp:127.0.0.1:3129", Dial: "unix:/c", HandOff: true}, WaitProxy: true, Notify: true, Trace: true, OverlayHome: "/home/u", Mounts: []Mount{{Path: "/p/.git"}, {Path: "/p/.mcp.json", ReadOnly: true}},
	}
	b, _ := in.MarshalBinary()
	var out InitSpec
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	for i := 0; i < len(b); i++ { // every truncation is an error, not a panic
		var x InitSpec
		if err := x.UnmarshalBinary(b[:i]); err == nil {
			t.Fatalf("truncated at %d: no error", i)
		}
	}
}

func FuzzInitSpec(f *testing.F) {
	b, _ := (&InitSpec{Argv: []string{"true"}, Env: []string{"A=1"}, Relays: []Relay{{Listen: "a", Dial: "b"}}}).MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var s InitSpec
		if s.UnmarshalBinary(data) == nil {
			again, _ := s.MarshalBinary()
			var s2 InitSpec
			if err := s2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(s, s2) {
				t.Fatalf("re-encoding changed the spec: %v", err)
			}
		}
	})
}
