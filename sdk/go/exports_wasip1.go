//go:build wasip1

package psp

import "unsafe"

type slot struct {
	caplen  uint32
	wirelen uint32
	data    [Prefix]byte
}

type ioBuffer struct {
	_       [0]uint64 // the ABI wants the buffer 8-byte aligned
	results [IOHeader / 4]int32
	slots   [MaxBatch]slot
}

var io ioBuffer // the I/O buffer; its address is fixed for the instance's life

func (s *slot) payload() []byte {
	n := s.caplen
	if n > Prefix {
		n = Prefix
	}
	return s.data[:n]
}

//go:wasmexport psp_abi_version
func pspABIVersion() int32 { return ABIVersion }

//go:wasmexport psp_io_buffer
func pspIOBuffer() int32 { return int32(uintptr(unsafe.Pointer(&io))) }

//go:wasmexport psp_io_buffer_size
func pspIOBufferSize() int32 { return int32(unsafe.Sizeof(io)) }

//go:wasmexport psp_num_types
func pspNumTypes() int32 { return registered.numTypes }

//go:wasmexport psp_type_names
func pspTypeNames() int32 {
	return int32(uintptr(unsafe.Pointer(unsafe.StringData(registered.typeNames))))
}

//go:wasmexport psp_type_names_len
func pspTypeNamesLen() int32 { return int32(len(registered.typeNames)) }

//go:wasmexport psp_classify
func pspClassify() int32 {
	s := &io.slots[0]
	return int32(registered.classify(s.payload(), s.wirelen))
}

//go:wasmexport psp_classify_batch
func pspClassifyBatch(n int32) int32 {
	if n < 0 || n > MaxBatch {
		return 0
	}
	fn := registered.classify
	for i := range io.slots[:n] {
		s := &io.slots[i]
		io.results[i] = int32(fn(s.payload(), s.wirelen))
	}
	return n
}
