// Package topology is gpulayer's placement core: locations and locality
// levels, GPU link matrices and the `nvidia-smi topo -m` parser, the choice of
// GPUs inside a machine (PickDevices) and of a group of machines for a job
// (Schedule).
//
// Everything here except the NVML adapter is pure: data in, data out, no
// network, SSH or file I/O, and the same inputs always give the same result.
// It imports no other gpulayer package.
package topology
