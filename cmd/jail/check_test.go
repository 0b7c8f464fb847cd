package main

import "testing"

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want bool
	}{{"0.8.0", true}, {"0.11.1", true}, {"1.0", true}, {"0.6.1", false}, {"0.7.99", false}, {"", false}, {"garbage", false}} {
		if got := versionAtLeast(tt.v, 0, 8); got != tt.want {
			t.Errorf("versionAtLeast(%q, 0, 8) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
