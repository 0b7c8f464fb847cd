package seccomp

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// lower rewrites a rule into rules that libseccomp can express, i.e. with at
// most one condition per argument. libseccomp ANDs the conditions of a rule
// but refuses two conditions on the same argument, so a rule such as
// "a0 != 1 && a0 != 2" ("a0 not in {1, 2}") is turned into several rules,
// ORed together, that each match one piece of the complement of the set:
// "a0 < 1", "a0 > 2" (plus, for the gaps between the values, aligned blocks
// matched with a masked compare). Several conditions on one argument are
// supported only when all of them are "!=". The result matches exactly the
// same argument values as the input.
func lower(r Rule) ([]Rule, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	// Group the conditions by argument, keeping the first-seen order.
	var args []uint
	byArg := map[uint][]Cond{}
	for _, c := range r.Conds {
		if _, ok := byArg[c.Arg]; !ok {
			args = append(args, c.Arg)
		}
		byArg[c.Arg] = append(byArg[c.Arg], c)
	}
	// For every argument, the alternatives (ORed) that each need one
	// condition; the rule is the AND over arguments of the OR of each
	// argument's alternatives, expanded into a cross product.
	alts := make([][]Cond, 0, len(args))
	for _, a := range args {
		cs := byArg[a]
		if len(cs) == 1 {
			alts = append(alts, cs)
			continue
		}
		var set []uint64
		for _, c := range cs {
			if c.Op != OpNe {
				return nil, fmt.Errorf("seccomp rule %q: several conditions on a%d must all be %q", r, a, OpNe)
			}
			set = append(set, c.Value)
		}
		alts = append(alts, notIn(a, set))
	}
	out := []Rule{{Syscall: r.Syscall, Errno: r.Errno, Why: r.Why}}
	for _, as := range alts {
		next := make([]Rule, 0, len(out)*len(as))
		for _, o := range out {
			for _, c := range as {
				n := o
				n.Conds = append(slices.Clip(o.Conds), c)
				next = append(next, n)
			}
		}
		out = next
	}
	return out, nil
}

// notIn returns single conditions on argument a whose union is exactly the
// set of 64-bit values not in set.
func notIn(a uint, set []uint64) []Cond {
	set = slices.Clone(set)
	slices.Sort(set)
	set = slices.Compact(set)
	var cs []Cond
	if set[0] > 0 {
		cs = append(cs, Cond{Arg: a, Op: OpLt, Value: set[0]})
	}
	for i := 0; i+1 < len(set); i++ {
		if set[i+1]-set[i] > 1 {
			cs = append(cs, blocks(a, set[i]+1, set[i+1]-1)...)
		}
	}
	if last := set[len(set)-1]; last < math.MaxUint64 {
		cs = append(cs, Cond{Arg: a, Op: OpGt, Value: last})
	}
	return cs
}

// blocks covers [lo, hi] (lo <= hi < MaxUint64) with aligned power-of-two
// blocks, each matched by one masked compare (or an equality for a block
// of one value).
func blocks(a uint, lo, hi uint64) []Cond {
	var cs []Cond
	for lo <= hi {
		// Largest block starting at lo that is aligned and fits.
		k := bits.TrailingZeros64(lo) // 64 when lo == 0
		for k > 0 && (k >= 64 || hi-lo < (uint64(1)<<k)-1) {
			k--
		}
		if k == 0 {
			cs = append(cs, Cond{Arg: a, Op: OpEq, Value: lo})
		} else {
			size := uint64(1) << k
			cs = append(cs, Cond{Arg: a, Op: OpMaskedEq, Mask: ^(size - 1), Value: lo})
		}
		next := lo + (uint64(1) << k)
		if next == 0 || next > hi { // wrapped or done
			break
		}
		lo = next
	}
	return cs
}

// validate checks the parts of a rule that do not depend on the platform.
func (r Rule) validate() error {
	if r.Syscall == "" {
		return fmt.Errorf("seccomp rule %q: no system call", r)
	}
	if r.Errno == "" {
		return fmt.Errorf("seccomp rule %q: no errno", r)
	}
	for _, c := range r.Conds {
		if c.Arg > 5 {
			return fmt.Errorf("seccomp rule %q: argument a%d out of range (a0..a5)", r, c.Arg)
		}
		switch c.Op {
		case OpEq, OpNe, OpGt, OpGe, OpLt, OpLe:
			if c.Mask != 0 {
				return fmt.Errorf("seccomp rule %q: mask given for %q", r, c.Op)
			}
		case OpMaskedEq:
			if c.Value&^c.Mask != 0 {
				return fmt.Errorf("seccomp rule %q: value %#x has bits outside mask %#x", r, c.Value, c.Mask)
			}
		default:
			return fmt.Errorf("seccomp rule %q: unknown operator %q", r, c.Op)
		}
	}
	return nil
}
