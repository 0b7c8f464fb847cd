//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// The probes are one object for every little-endian kernel: they read a
// system call's number and arguments from the saved user registers
// through CO-RE, with a local struct for each layout (pt_regs___x86,
// pt_regs___arm64, see headers/jail_core.h), and at load time the loader
// relocates the field offsets against the running kernel's struct
// pt_regs. These tests run that relocation on this machine against a
// kernel of each architecture and check that every register the probes
// read lands where the kernel saves it.

// relocKey names one relocation: the local type, the member path
// (accessor: member indices in the local struct, then an array index),
// and the kind.
type relocKey struct{ typ, accessor, kind string }

// regsLayout is where a kernel's struct pt_regs keeps what the probes
// read: wanted fixup targets by relocation, and the relocations of the
// other architecture's local struct, which must come out as absent.
type regsLayout struct {
	want    map[relocKey]uint64
	foreign string
}

// arm64Layout: arch/arm64/include/asm/ptrace.h. The arguments are in
// orig_x0 (x0 is overwritten by the result before sys_exit) and x1-x5,
// the number in syscallno, the AArch32 mode bit in pstate. struct
// thread_info has no status field: the x86 compat check must be absent.
func arm64Layout() regsLayout {
	w := map[relocKey]uint64{
		{"pt_regs___arm64", "0:1", "byte_off"}:     264, // pstate
		{"pt_regs___arm64", "0:2", "byte_off"}:     272, // orig_x0
		{"pt_regs___arm64", "0:3", "byte_off"}:     280, // syscallno
		{"pt_regs___arm64", "0:1", "field_exists"}: 1,
		{"pt_regs___arm64", "0:2", "field_exists"}: 1,
		{"pt_regs___arm64", "0:3", "field_exists"}: 1,
		{"thread_info", "0:0", "field_exists"}:     0,
	}
	for i := 1; i <= 5; i++ {
		w[relocKey{"pt_regs___arm64", "0:0:" + strconv.Itoa(i), "byte_off"}] = uint64(8 * i) // regs[i]
	}
	return regsLayout{want: w, foreign: "pt_regs___x86"}
}

// x86Layout: arch/x86/include/asm/ptrace.h, arguments in di, si, dx,
// r10, r8, r9 and the number in orig_ax.
func x86Layout() regsLayout {
	return regsLayout{want: map[relocKey]uint64{
		{"pt_regs___x86", "0:0", "byte_off"}:     56,  // r10
		{"pt_regs___x86", "0:1", "byte_off"}:     64,  // r9
		{"pt_regs___x86", "0:2", "byte_off"}:     72,  // r8
		{"pt_regs___x86", "0:3", "byte_off"}:     96,  // dx
		{"pt_regs___x86", "0:4", "byte_off"}:     104, // si
		{"pt_regs___x86", "0:5", "byte_off"}:     112, // di
		{"pt_regs___x86", "0:6", "byte_off"}:     120, // orig_ax
		{"pt_regs___x86", "0:6", "field_exists"}: 1,
		{"thread_info", "0:0", "field_exists"}:   1,
	}, foreign: "pt_regs___arm64"}
}

// mustSee are the relocations each architecture's probes cannot work
// without: the number at sys_exit and the arguments at sys_enter.
var mustSee = map[string][]relocKey{
	"arm64": {{"pt_regs___arm64", "0:3", "byte_off"}, {"pt_regs___arm64", "0:2", "byte_off"},
		{"pt_regs___arm64", "0:0:1", "byte_off"}, {"pt_regs___arm64", "0:0:4", "byte_off"}},
	"amd64": {{"pt_regs___x86", "0:6", "byte_off"}, {"pt_regs___x86", "0:5", "byte_off"},
		{"pt_regs___x86", "0:4", "byte_off"}, {"pt_regs___x86", "0:2", "byte_off"}},
}

// relocate computes the probes' CO-RE fixups against kernel and returns,
// per relocation of a register struct or thread_info, the fixed-up value
// ("poison" when the field is absent), failing on two different values
// for one relocation.
func relocate(t *testing.T, kernel *btf.Spec) map[relocKey]string {
	t.Helper()
	spec, err := loadProbes()
	if err != nil {
		t.Fatal(err)
	}
	got := map[relocKey]string{}
	for _, name := range []string{"sys_enter", "sys_exit"} {
		insns := spec.Programs[name].Instructions
		var relos []*btf.CORERelocation
		var at []int
		for i := range insns {
			if r := btf.CORERelocationMetadata(&insns[i]); r != nil {
				relos = append(relos, r)
				at = append(at, i)
			}
		}
		fixups, err := btf.CORERelocate(relos, []*btf.Spec{kernel}, binary.LittleEndian,
			func(btf.Type) (btf.TypeID, error) { return 0, errors.New("no local type IDs expected") })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, r := range relos {
			k, ok := parseReloc(r.String())
			if !ok {
				t.Fatalf("unexpected relocation %s", r)
			}
			ins := insns[at[i]]
			if err := fixups[i].Apply(&ins); err != nil {
				t.Errorf("%s: applying %s for %s: %v", name, fixups[i].String(), r, err)
			}
			if !strings.HasPrefix(k.typ, "pt_regs") && k.typ != "thread_info" {
				continue
			}
			v := fixups[i].String()
			if _, target, ok := strings.Cut(v, "->"); ok {
				v = target
			} else if !strings.HasSuffix(v, "=poison") {
				t.Fatalf("unexpected fixup %s", v)
			} else {
				v = "poison"
			}
			if old, seen := got[k]; seen && old != v {
				t.Errorf("%v: fixed up to %s and %s", k, old, v)
			}
			got[k] = v
		}
	}
	return got
}

// parseReloc reads `CORERelocation(byte_off, Struct:"pt_regs___x86"[0:6], local_id=60)`.
func parseReloc(s string) (relocKey, bool) {
	var k relocKey
	rest, ok := strings.CutPrefix(s, "CORERelocation(")
	if !ok {
		return k, false
	}
	k.kind, rest, ok = strings.Cut(rest, ", ")
	if !ok {
		return k, false
	}
	_, rest, ok = strings.Cut(rest, `"`)
	if !ok {
		return k, false
	}
	k.typ, rest, ok = strings.Cut(rest, `"[`)
	if !ok {
		return k, false
	}
	k.accessor, _, ok = strings.Cut(rest, "]")
	return k, ok
}

func checkLayout(t *testing.T, arch string, kernel *btf.Spec, layout regsLayout) {
	t.Helper()
	got := relocate(t, kernel)
	for k, v := range got {
		switch {
		case k.typ == layout.foreign:
			if v != "poison" && v != "0" {
				t.Errorf("%s kernel: %v of the other architecture's registers is %s, want absent", arch, k, v)
			}
		default:
			want, ok := layout.want[k]
			if !ok {
				t.Errorf("%s kernel: unexpected relocation %v -> %s", arch, k, v)
			} else if v != strconv.FormatUint(want, 10) {
				t.Errorf("%s kernel: %v -> %s, want %d", arch, k, v, want)
			}
		}
	}
	for _, k := range mustSee[arch] {
		if _, ok := got[k]; !ok {
			t.Errorf("%s kernel: the probes do not read %v", arch, k)
		}
	}
}

// TestRegistersArm64 relocates the probes against an arm64 kernel's types
// (built here after arch/arm64/include/asm/ptrace.h: regs in an anonymous
// struct in an anonymous union, as in the kernel) and checks the offsets.
func TestRegistersArm64(t *testing.T) {
	checkLayout(t, "arm64", buildBTF(t, arm64KernelTypes()), arm64Layout())
}

// TestRegistersX86 does the same against an x86_64 kernel's types.
func TestRegistersX86(t *testing.T) {
	checkLayout(t, "amd64", buildBTF(t, x86KernelTypes()), x86Layout())
}

// TestRegistersRunningKernel relocates against this machine's kernel BTF.
func TestRegistersRunningKernel(t *testing.T) {
	layouts := map[string]func() regsLayout{"amd64": x86Layout, "arm64": arm64Layout}
	layout, ok := layouts[runtime.GOARCH]
	if !ok {
		t.Skipf("the probes do not read %s's registers", runtime.GOARCH)
	}
	kernel, err := btf.LoadKernelSpec()
	if errors.Is(err, btf.ErrNotSupported) {
		t.Skipf("the kernel has no BTF (CONFIG_DEBUG_INFO_BTF), so the probes cannot load here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkLayout(t, runtime.GOARCH, kernel, layout())
}

func buildBTF(t *testing.T, types []btf.Type) *btf.Spec {
	t.Helper()
	b, err := btf.NewBuilder(types, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, &btf.MarshalOptions{Order: binary.LittleEndian})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

var (
	u64 = &btf.Typedef{Name: "u64", Type: &btf.Int{Name: "long long unsigned int", Size: 8}}
	u32 = &btf.Typedef{Name: "u32", Type: &btf.Int{Name: "unsigned int", Size: 4}}
	s32 = &btf.Typedef{Name: "s32", Type: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed}}
)

// members lays out named fields of the given types in order, from byte
// offset at (no padding: the kernel structs here need none).
func members(at uint32, fields ...any) []btf.Member {
	var ms []btf.Member
	for i := 0; i < len(fields); i += 2 {
		typ := fields[i+1].(btf.Type)
		ms = append(ms, btf.Member{Name: fields[i].(string), Type: typ, Offset: btf.Bits(8 * at)})
		size, err := btf.Sizeof(typ)
		if err != nil {
			panic(fmt.Sprint(typ, err))
		}
		at += uint32(size)
	}
	return ms
}

// arm64KernelTypes: struct pt_regs and struct thread_info of arm64.
//
//	struct pt_regs {
//		union {
//			struct user_pt_regs user_regs;
//			struct { u64 regs[31]; u64 sp; u64 pc; u64 pstate; };
//		};
//		u64 orig_x0;
//		s32 syscallno;
//		u32 pmr;
//		u64 sdei_ttbr1;
//		...
//	};
func arm64KernelTypes() []btf.Type {
	regs := &btf.Array{Index: u32, Type: u64, Nelems: 31}
	userRegs := &btf.Struct{Name: "user_pt_regs", Size: 272, Members: members(0, "regs", regs, "sp", u64, "pc", u64, "pstate", u64)}
	anon := &btf.Struct{Size: 272, Members: members(0, "regs", regs, "sp", u64, "pc", u64, "pstate", u64)}
	union := &btf.Union{Size: 272, Members: []btf.Member{{Name: "user_regs", Type: userRegs}, {Type: anon}}}
	ptRegs := &btf.Struct{Name: "pt_regs", Size: 336, Members: append([]btf.Member{{Type: union}},
		members(272, "orig_x0", u64, "syscallno", s32, "pmr", u32, "sdei_ttbr1", u64)...)}
	threadInfo := &btf.Struct{Name: "thread_info", Size: 32, Members: members(0, "flags", u64, "ttbr0", u64, "preempt_count", u64, "scs_base", u64)}
	return []btf.Type{ptRegs, threadInfo}
}

// x86KernelTypes: struct pt_regs and struct thread_info of x86_64.
func x86KernelTypes() []btf.Type {
	ul := &btf.Int{Name: "long unsigned int", Size: 8}
	var fields []any
	for _, n := range []string{"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8",
		"ax", "cx", "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss"} {
		fields = append(fields, n, btf.Type(ul))
	}
	ptRegs := &btf.Struct{Name: "pt_regs", Size: 168, Members: members(0, fields...)}
	threadInfo := &btf.Struct{Name: "thread_info", Size: 24, Members: members(0, "flags", ul, "syscall_work", ul, "status", u32, "cpu", u32)}
	return []btf.Type{ptRegs, threadInfo}
}
