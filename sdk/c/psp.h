/*
 * psp.h: write a psp request classifier in C (ABI v1, see sdk/ABI.md).
 *
 * Header-only, freestanding (no libc). Write one function from a payload to
 * a request type and hand it to PSP_CLASSIFIER once, in one source file:
 *
 *     #include "psp.h"
 *
 *     static uint32_t classify(const uint8_t *p, uint32_t caplen,
 *                              uint32_t wirelen) {
 *         (void)wirelen;
 *         if (caplen < 16) return 0;            // 0 is UNKNOWN
 *         uint32_t t = psp_load_u32le(p + 4);
 *         return t < 3 ? t : 0;
 *     }
 *
 *     PSP_CLASSIFIER(classify, 3, "UNKNOWN\nSHORT\nLONG")
 *
 * p points at the first caplen bytes of the payload (caplen <= PSP_PREFIX);
 * wirelen is the payload's real length (>= caplen). Read only caplen bytes.
 * Return a type in 0..N-1: anything else is counted as a fault by the host
 * and the packet goes to UNKNOWN. The function must not keep state that
 * changes its answers between packets.
 *
 * Build (clang 14 + lld; every export is declared here, none on the command
 * line):
 *
 *     clang --target=wasm32 -nostdlib -O2 -Wl,--no-entry \
 *           -I sdk/c -o classifier.wasm classifier.c
 */
#ifndef PSP_H
#define PSP_H

#include <stdint.h>

#if !defined(__wasm32__)
#error "psp.h targets wasm32: build with clang --target=wasm32"
#endif

#define PSP_ABI_VERSION 1
#define PSP_IO_HEADER 128 /* results area at the start of the I/O buffer */
#define PSP_SLOT 256      /* stride of a slot */
#define PSP_PREFIX 248    /* payload bytes a slot can hold */
#define PSP_MAX_BATCH 32  /* slots the host fills per call, at most */

/* One packet as the host writes it. */
typedef struct psp_slot {
	uint32_t caplen;            /* bytes present in data (<= PSP_PREFIX) */
	uint32_t wirelen;           /* the payload's real length */
	uint8_t data[PSP_PREFIX];   /* the first caplen bytes of the payload */
} psp_slot;

/* The I/O buffer: results, then PSP_MAX_BATCH slots. */
typedef struct psp_io {
	int32_t results[PSP_IO_HEADER / 4];
	psp_slot slots[PSP_MAX_BATCH];
} psp_io;

_Static_assert(sizeof(psp_slot) == PSP_SLOT, "slot layout");
_Static_assert(__builtin_offsetof(psp_io, slots) == PSP_IO_HEADER, "io layout");

/* psp_load_u32le reads a little-endian u32 at any alignment. */
static inline uint32_t psp_load_u32le(const uint8_t *p) {
	uint32_t v;
	__builtin_memcpy(&v, p, 4); /* wasm32 is little-endian */
	return v;
}

/* psp_load_u16le reads a little-endian u16 at any alignment. */
static inline uint32_t psp_load_u16le(const uint8_t *p) {
	uint16_t v;
	__builtin_memcpy(&v, p, 2);
	return v;
}

/* psp_lower folds an ASCII letter to lower case; other bytes are unchanged. */
static inline uint8_t psp_lower(uint8_t c) {
	return (uint8_t)(c - 'A') < 26 ? (uint8_t)(c | 0x20) : c;
}

#define PSP_EXPORT(name) __attribute__((export_name(#name), visibility("default")))

/*
 * PSP_CLASSIFIER(fn, ntypes, names) defines the I/O buffer and every export
 * of the ABI around fn:
 *
 *   fn      static uint32_t fn(const uint8_t *payload, uint32_t caplen,
 *                              uint32_t wirelen)
 *   ntypes  N: fn returns 0..N-1 (1 <= N <= 65536)
 *   names   a string literal: one type name per line, line i naming type i
 *           ("" for none, or "UNKNOWN\nGET\nSET"); an empty line leaves a
 *           type unnamed.
 *
 * Use it once per module, at file scope.
 */
#define PSP_CLASSIFIER(fn, ntypes, names)                                          \
	_Static_assert((ntypes) >= 1 && (ntypes) <= 65536, "ntypes out of range");    \
	static psp_io psp_io_buf __attribute__((aligned(8)));                         \
	static const char psp_names_buf[] = names;                                    \
	PSP_EXPORT(psp_abi_version) int32_t psp_abi_version(void) {                   \
		return PSP_ABI_VERSION;                                                   \
	}                                                                             \
	PSP_EXPORT(psp_io_buffer) int32_t psp_io_buffer(void) {                       \
		return (int32_t)(uintptr_t)&psp_io_buf;                                   \
	}                                                                             \
	PSP_EXPORT(psp_io_buffer_size) int32_t psp_io_buffer_size(void) {             \
		return (int32_t)sizeof(psp_io_buf);                                       \
	}                                                                             \
	PSP_EXPORT(psp_num_types) int32_t psp_num_types(void) { return (ntypes); }    \
	PSP_EXPORT(psp_type_names) int32_t psp_type_names(void) {                     \
		return (int32_t)(uintptr_t)psp_names_buf;                                 \
	}                                                                             \
	PSP_EXPORT(psp_type_names_len) int32_t psp_type_names_len(void) {             \
		return (int32_t)(sizeof(psp_names_buf) - 1);                              \
	}                                                                             \
	PSP_EXPORT(psp_classify) int32_t psp_classify(void) {                         \
		const psp_slot *s = &psp_io_buf.slots[0];                                 \
		return (int32_t)fn(s->data, s->caplen, s->wirelen);                       \
	}                                                                             \
	PSP_EXPORT(psp_classify_batch) int32_t psp_classify_batch(int32_t n) {        \
		if (n < 0 || n > PSP_MAX_BATCH)                                           \
			n = 0;                                                                \
		for (int32_t i = 0; i < n; i++) {                                         \
			const psp_slot *s = &psp_io_buf.slots[i];                             \
			psp_io_buf.results[i] = (int32_t)fn(s->data, s->caplen, s->wirelen);  \
		}                                                                         \
		return n;                                                                 \
	}

#endif /* PSP_H */
