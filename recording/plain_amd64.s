#include "textflag.h"

// PLAIN16(x, gt, eq) leaves in eq 0xff for each byte of x that needs no
// escaping, 0 for the others, with X1-X3 holding the constants below; x
// and gt are scratch.
#define PLAIN16(x, gt, eq) \
	MOVO    x, gt \
	PCMPGTB X3, gt \
	MOVO    x, eq \
	PCMPEQB X1, eq \
	PCMPEQB X2, x \
	POR     x, eq \
	PANDN   gt, eq

// func plainPrefix(s []byte) int
//
// The length of s's longest prefix, in whole 16-byte blocks, of bytes that
// need no escaping in a JSON string: 0x20-0x7f but '"' and '\'. SSE2,
// which every amd64 has: 32 bytes a round, then 16.
TEXT ·plainPrefix(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), CX
	XORQ AX, AX
	MOVQ $0x2222222222222222, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1 // '"' in every byte
	MOVQ $0x5c5c5c5c5c5c5c5c, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2 // '\'
	MOVQ $0x1f1f1f1f1f1f1f1f, DX
	MOVQ DX, X3
	PUNPCKLQDQ X3, X3 // 0x1f: a byte above it, signed, is 0x20-0x7f

loop32:
	MOVQ CX, DX
	SUBQ AX, DX
	CMPQ DX, $32
	JB   loop16
	MOVOU (SI)(AX*1), X0
	MOVOU 16(SI)(AX*1), X8
	PLAIN16(X0, X4, X5)
	PLAIN16(X8, X9, X10)
	PAND  X10, X5
	PMOVMSKB X5, DX
	CMPL  DX, $0xffff
	JNE   loop16 // one of the 32 is not: find it 16 at a time
	ADDQ  $32, AX
	JMP   loop32

loop16:
	MOVQ CX, DX
	SUBQ AX, DX
	CMPQ DX, $16
	JB   done
	MOVOU (SI)(AX*1), X0
	PLAIN16(X0, X4, X5)
	PMOVMSKB X5, DX
	XORL  $0xffff, DX
	JNZ   found
	ADDQ  $16, AX
	JMP   loop16

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	MOVQ AX, ret+24(FP)
	RET
