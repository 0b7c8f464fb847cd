package seccomp

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// holds evaluates a condition the way the kernel filter does (64-bit).
func (c Cond) holds(args [6]uint64) bool {
	v := args[c.Arg]
	switch c.Op {
	case OpEq:
		return v == c.Value
	case OpNe:
		return v != c.Value
	case OpGt:
		return v > c.Value
	case OpGe:
		return v >= c.Value
	case OpLt:
		return v < c.Value
	case OpLe:
		return v <= c.Value
	case OpMaskedEq:
		return v&c.Mask == c.Value
	}
	panic("unknown op " + c.Op)
}

func (r Rule) matches(args [6]uint64) bool {
	for _, c := range r.Conds {
		if !c.holds(args) {
			return false
		}
	}
	return true
}

// TestLowerEquivalent checks that the lowered rules (ORed) match exactly the
// argument values the original rule matches, on boundary and random values.
func TestLowerEquivalent(t *testing.T) {
	rules := append(DefaultRules(),
		Rule{Syscall: "x", Errno: EPERM, Conds: []Cond{
			{Arg: 0, Op: OpNe, Value: 0}, {Arg: 0, Op: OpNe, Value: math.MaxUint64},
			{Arg: 1, Op: OpNe, Value: 5}, {Arg: 1, Op: OpNe, Value: 7}, {Arg: 2, Op: OpGe, Value: 3}}},
		Rule{Syscall: "y", Errno: EPERM, Conds: []Cond{
			{Arg: 3, Op: OpNe, Value: 1 << 63}, {Arg: 3, Op: OpNe, Value: 1<<63 + 2}}},
	)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, r := range rules {
		low, err := lower(r)
		if err != nil {
			t.Fatalf("%q: %v", r, err)
		}
		// Interesting values: every constant of the rule and its neighbours,
		// 32-bit boundaries, extremes, plus random values.
		var vals []uint64
		for _, c := range r.Conds {
			for _, d := range []uint64{0, 1, 2} {
				vals = append(vals, c.Value+d, c.Value-d, c.Value|1<<32, c.Value|0xdead<<32)
			}
		}
		vals = append(vals, 0, math.MaxUint32, 1<<32, math.MaxUint64, 1<<63)
		for range 2000 {
			vals = append(vals, rng.Uint64(), rng.Uint64()&0xffffffff, rng.Uint64()&0x3ffff)
		}
		for i := range 20000 {
			var args [6]uint64
			for a := range args {
				args[a] = vals[rng.IntN(len(vals))]
			}
			if i < len(vals) {
				args[0], args[3] = vals[i], vals[i]
			}
			want := r.matches(args)
			got := false
			for _, l := range low {
				got = got || l.matches(args)
			}
			if got != want {
				t.Fatalf("%q with args %#x: lowered rules match=%v, rule match=%v", r, args, got, want)
			}
		}
		for _, l := range low {
			perArg := map[uint]int{}
			for _, c := range l.Conds {
				if perArg[c.Arg]++; perArg[c.Arg] > 1 {
					t.Errorf("lowered rule %q has two conditions on a%d", l, c.Arg)
				}
			}
		}
	}
}

func TestLowerRejects(t *testing.T) {
	for _, r := range []Rule{
		{Syscall: "x", Errno: EPERM, Conds: []Cond{{Arg: 0, Op: OpGt, Value: 1}, {Arg: 0, Op: OpLt, Value: 9}}},
		{Syscall: "x", Errno: EPERM, Conds: []Cond{{Arg: 6, Op: OpEq}}},
		{Syscall: "x", Errno: EPERM, Conds: []Cond{{Arg: 0, Op: "=~"}}},
		{Syscall: "x", Errno: EPERM, Conds: []Cond{{Arg: 0, Op: OpMaskedEq, Mask: 1, Value: 2}}},
		{Syscall: "x", Errno: EPERM, Conds: []Cond{{Arg: 0, Op: OpEq, Mask: 1}}},
		{Syscall: "", Errno: EPERM},
		{Syscall: "x"},
	} {
		if _, err := lower(r); err == nil {
			t.Errorf("lower(%q) accepted an invalid rule", r)
		} else if !strings.Contains(err.Error(), "seccomp rule") {
			t.Errorf("lower(%q): error %q does not name the rule", r, err)
		}
	}
}
