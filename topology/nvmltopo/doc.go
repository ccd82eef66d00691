// Package nvmltopo reads one machine's GPU link matrix from the NVIDIA
// driver through NVML (github.com/NVIDIA/go-nvml), as `nvidia-smi topo -m`
// would print it: PCIe levels, NVLink counts (NVSwitch included), CPU and
// NUMA affinity and the GPU NUMA ID.
//
// NVML sees GPUs only: NICs are not reported, so the matrix it returns has no
// NICs and no GPU-to-NIC links. Use `nvidia-smi topo -m` (topology.ParseSMI)
// when those matter.
//
// go-nvml needs cgo, and after a failed nvml.Init any other call into it
// kills the process. The real code is built only under linux && cgo and
// makes no call after a failed Init; elsewhere Local reports ErrUnavailable.
// This package must not run commands, read files or fall back to nvidia-smi
// itself: callers decide what to do when NVML is unavailable.
package nvmltopo
