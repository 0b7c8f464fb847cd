package seccomp

import (
	"encoding/binary"
	"fmt"
)

// instructionSize is sizeof(struct sock_filter).
const instructionSize = 8

// Marshal encodes a program as the kernel's struct sock_filter array
// (8 bytes per instruction, native byte order), e.g. to hand it to another
// process over a pipe.
func Marshal(prog []SockFilter) []byte {
	b := make([]byte, 0, len(prog)*instructionSize)
	for _, ins := range prog {
		b = binary.NativeEndian.AppendUint16(b, ins.Code)
		b = append(b, ins.Jt, ins.Jf)
		b = binary.NativeEndian.AppendUint32(b, ins.K)
	}
	return b
}

// Unmarshal decodes what Marshal produced (or what libseccomp exports).
func Unmarshal(b []byte) ([]SockFilter, error) {
	if len(b)%instructionSize != 0 {
		return nil, fmt.Errorf("seccomp program: %d bytes is not a multiple of %d", len(b), instructionSize)
	}
	prog := make([]SockFilter, 0, len(b)/instructionSize)
	for ; len(b) > 0; b = b[instructionSize:] {
		prog = append(prog, SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:2]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:8]),
		})
	}
	return prog, nil
}
