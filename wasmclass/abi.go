package wasmclass

// ABI v1 constants (sdk/ABI.md).
const (
	// ABIVersion is the classifier ABI this host implements.
	ABIVersion = 1
	// IOHeader is the size of the results area at the start of the I/O buffer.
	IOHeader = 128
	// SlotSize is the stride of the packet slots that follow the results.
	SlotSize = 256
	// Prefix is the number of payload bytes a slot can hold (SlotSize - 8).
	Prefix = SlotSize - 8
	// MaxBatch is the largest number of packets per psp_classify_batch call.
	MaxBatch = 32
	// MaxTypes is the largest N a classifier may declare.
	MaxTypes = 65536
)

// Export names of ABI v1.
const (
	exportMemory       = "memory"
	exportABIVersion   = "psp_abi_version"
	exportIOBuffer     = "psp_io_buffer"
	exportIOBufferSize = "psp_io_buffer_size"
	exportNumTypes     = "psp_num_types"
	exportClassify     = "psp_classify"
	exportBatch        = "psp_classify_batch"
	exportNames        = "psp_type_names"
	exportNamesLen     = "psp_type_names_len"
	exportInitialize   = "_initialize"
	customTypeNames    = "psp.types"
	wasiModule         = "wasi_snapshot_preview1"
)
