// Package topology is one machine's GPUs: their link matrix and the
// `nvidia-smi topo -m` parser (ParseSMI), NVLink islands and NIC locality,
// and the choice of the best-connected free GPUs inside a machine
// (PickDevices). NVML discovery is in topology/nvmltopo.
//
// Groups of machines — locations, locality levels, workers, policies and the
// scheduler that places a job on a group of them — are package placement's,
// which imports this one for each machine's GPUs.
//
// Everything here except the NVML adapter is pure: data in, data out, no
// network, SSH or file I/O, and the same inputs always give the same result.
// It imports no other gpulayer package.
package topology
