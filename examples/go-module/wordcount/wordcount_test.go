package wordcount

import (
	"reflect"
	"strings"
	"testing"
)

func TestCounts(t *testing.T) {
	got, err := Counts(strings.NewReader("The cat, the hat. THE end! cat?"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Count{{"the", 3}, {"cat", 2}, {"end", 1}, {"hat", 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
}

func TestCountsEmpty(t *testing.T) {
	got, err := Counts(strings.NewReader("  ... --- "))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("Counts = %v, want none", got)
	}
}
